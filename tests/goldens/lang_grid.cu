extern "C" __global__ void __launch_bounds__(32) grid_loops(float* __restrict__ A, float* __restrict__ B) {
  const int tirx_tid = (int)threadIdx.x;
  int i;
  int j;
  int k;
  int k_2;
  int k_3;
  (void)tirx_tid;
#line 22
  if (((tirx_tid & 31) == 0)) {
#line 23
    for (i = 0; i < 4; ++i) {
#line 23
      for (j = 2; j < 8; ++j) {
#line 24
        B[((i * 8) + j)] = ((A[((i * 8) + j)] * 2.0f) + ((float)i));
      }
    }
#line 25
    for (k = 1; k < 8; k += 3) {
#line 26
      B[k] = (B[k] + 100.0f);
    }
#line 27
    #pragma unroll
    for (k_2 = 0; k_2 < 2; ++k_2) {
#line 28
      B[(k_2 + 8)] = -1.0f;
    }
#line 29
    #pragma unroll
    for (k_3 = 0; k_3 < 4; ++k_3) {
#line 30
      B[(k_3 + 24)] = (B[(k_3 + 24)] + 0x1.0000000000000p-1f);
    }
  }
}
