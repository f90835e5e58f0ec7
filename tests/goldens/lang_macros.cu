extern "C" __global__ void __launch_bounds__(32) macros(int* __restrict__ A, int* __restrict__ B) {
  const int tirx_tid = (int)threadIdx.x;
  int lane;
  int tmp;
  int j;
  [[maybe_unused]] int j_2;
  int tmp_2;
  (void)tirx_tid;
#line 125
  lane = (tirx_tid & 31);
#line 126
  tmp = (lane + 100);
#line 118
  j = tirx_min<int>((lane + 4), 31);
#line 127
  j_2 = j;
#line 112
  tmp_2 = (A[tirx_min<int>(((tirx_tid & 31) + 4), 31)] * 3);
#line 113
  B[(tirx_tid & 31)] = tmp_2;
#line 129
  B[(tirx_tid & 31)] = (B[(tirx_tid & 31)] + tmp);
}
