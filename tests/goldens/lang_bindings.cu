extern "C" __global__ void __launch_bounds__(32) bindings(int* __restrict__ A, int* __restrict__ B) {
  const int tirx_tid = (int)threadIdx.x;
  int lane;
  [[maybe_unused]] int base;
  int off;
  [[maybe_unused]] int width;
  int acc;
  int k;
  (void)tirx_tid;
#line 91
  lane = (tirx_tid & 31);
#line 93
  base = ((lane / 8) * 8);
#line 94
  off = (lane % 8);
#line 95
  width = 8;
#line 96
  acc = 0;
#line 97
  for (k = 0; k < 4; ++k) {
#line 98
    acc = (acc + A[(((k * 8) + (tirx_tid & 31)) % 32)]);
  }
#line 100
  B[(tirx_tid & 31)] = ((acc * 10) + off);
}
