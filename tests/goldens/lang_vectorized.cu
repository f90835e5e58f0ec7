extern "C" __global__ void __launch_bounds__(64) vector_loops(float* __restrict__ A, float* __restrict__ B, unsigned short* __restrict__ H, unsigned short* __restrict__ G) {
  const int tirx_tid = (int)threadIdx.x;
  int t;
  [[maybe_unused]] int r;
  [[maybe_unused]] int c;
  int v;
  int v_2;
  int v_3;
  (void)tirx_tid;
#line 52
  t = ((int)threadIdx.x);
#line 53
  r = (t / 2);
#line 54
  c = ((t % 2) * 4);
#line 55
  v = 0;
  *reinterpret_cast<uint4*>(&B[(v + (((int)threadIdx.x) * 4))]) = *reinterpret_cast<const uint4*>(&A[(v + (((int)threadIdx.x) * 4))]);
  v = 4;
#line 57
  if ((t < 32)) {
#line 58
    v_2 = 0;
    *reinterpret_cast<uint4*>(&G[(v_2 + (((int)threadIdx.x) * 8))]) = *reinterpret_cast<const uint4*>(&H[(v_2 + (((int)threadIdx.x) * 8))]);
    v_2 = 8;
  }
#line 60
  if ((t < 8)) {
#line 61
    #pragma unroll
    for (v_3 = 0; v_3 < 4; ++v_3) {
#line 62
      B[((((int)threadIdx.x) * 8) + v_3)] = ((B[((((int)threadIdx.x) * 8) + v_3)] * 2.0f) + 1.0f);
    }
  }
}
