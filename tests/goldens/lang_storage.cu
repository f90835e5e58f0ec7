extern "C" __global__ void __launch_bounds__(32) storage(float* __restrict__ A, unsigned int* __restrict__ Bits, float* __restrict__ Back, unsigned int* __restrict__ Addr, short* __restrict__ Half, unsigned long long* __restrict__ Pair) {
  __shared__ __align__(128) unsigned char tirx_smem[128];
  const unsigned int tirx_smem_addr = (unsigned int)__cvta_generic_to_shared(tirx_smem);
  float* s = reinterpret_cast<float*>(tirx_smem + 0);
  const int tirx_tid = (int)threadIdx.x;
  int lane;
  (void)tirx_tid;
#line 147
  lane = (tirx_tid & 31);
#line 149
  s[(tirx_tid & 31)] = A[(tirx_tid & 31)];
#line 150
  __syncthreads();
#line 151
  Bits[(tirx_tid & 31)] = ((unsigned int)(__float_as_uint(s[(tirx_tid & 31)])));
#line 152
  Back[(tirx_tid & 31)] = __uint_as_float(((unsigned int)((Bits[(tirx_tid & 31)] ^ 2147483648u))));
#line 153
  Addr[(tirx_tid & 31)] = ((tirx_smem_addr + 0u + (unsigned int)(((tirx_tid & 31) * 4))) - (tirx_smem_addr + 0u + (unsigned int)(0)));
#line 154
  Half[(tirx_tid & 31)] = ((short)(tirx_f2h((float)(tirx_h2f(tirx_f2h((float)(A[(tirx_tid & 31)])))))));
#line 156
  if ((lane < 16)) {
#line 157
    Pair[(tirx_tid & 31)] = reinterpret_cast<unsigned long long*>(s)[(tirx_tid & 31)];
  }
}
