extern "C" __global__ void __launch_bounds__(64) conditional(float* __restrict__ A, float* __restrict__ B, float* __restrict__ C) {
  const int tirx_tid = (int)threadIdx.x;
  int t;
  (void)tirx_tid;
#line 75
  t = ((int)threadIdx.x);
#line 77
  B[((int)threadIdx.x)] = ((t < 32) ? A[((int)threadIdx.x)] : -1.0f);
#line 78
  C[((int)threadIdx.x)] = (((t % 2) == 0) ? ((float)(t)) : (A[(((int)threadIdx.x) % 32)] * 2.0f));
}
