extern "C" __global__ void __launch_bounds__(256) thread_ids(int* __restrict__ Out) {
  const int tirx_tid = (int)(threadIdx.x + 64 * (threadIdx.y + 4 * threadIdx.z));
  int t;
  (void)tirx_tid;
#line 174
  t = (((int)threadIdx.x) + (64 * ((int)threadIdx.y)));
#line 175
  Out[(((int)threadIdx.x) + (((int)threadIdx.y) * 64))] = t;
#line 176
  Out[(((int)threadIdx.x) + (((int)threadIdx.y) * 64) + 256)] = (((int)threadIdx.x) + (64 * ((int)threadIdx.y)));
#line 177
  Out[(((int)threadIdx.x) + (((int)threadIdx.y) * 64) + 512)] = ((((int)threadIdx.x) + (64 * ((int)threadIdx.y))) / 128);
#line 178
  Out[(((int)threadIdx.x) + (((int)threadIdx.y) * 64) + 768)] = (((((int)threadIdx.x) + (64 * ((int)threadIdx.y))) / 32) % 4);
#line 179
  Out[(((int)threadIdx.x) + (((int)threadIdx.y) * 64) + 1024)] = ((((int)threadIdx.x) + (64 * ((int)threadIdx.y))) % 128);
}
