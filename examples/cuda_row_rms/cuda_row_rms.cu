// y[r] = sqrt(mean(x[r, :]^2)): a row reduction over X [R, C] (float32, row-major), y [R].
//
// GROUP threads cooperate on one row (strided loads, then a shuffle reduction inside the group); a
// block of THREADS threads handles THREADS / GROUP rows.  VEC elements are loaded per instruction
// (float4 when VEC == 4).  The defaults -- one thread per row, scalar loads -- are the naive starting
// point: neighbouring threads read addresses C floats apart, so no load is coalesced.
#include "kernelpilot_cuda.hpp"

#ifndef THREADS
#define THREADS 128
#endif
#ifndef GROUP
#define GROUP 1
#endif
#ifndef VEC
#define VEC 1
#endif

template <int V>
struct Vec;
template <>
struct Vec<1> {
  using type = float;
  __device__ static float sumsq(type v) { return v * v; }
};
template <>
struct Vec<2> {
  using type = float2;
  __device__ static float sumsq(type v) { return v.x * v.x + v.y * v.y; }
};
template <>
struct Vec<4> {
  using type = float4;
  __device__ static float sumsq(type v) { return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }
};

__global__ void __launch_bounds__(THREADS) row_rms_kernel(const float* x, float* y, int R, int C) {
  constexpr int ROWS = THREADS / GROUP;
  const int lane = threadIdx.x % GROUP;
  const int row = blockIdx.x * ROWS + threadIdx.x / GROUP;
  float acc = 0.0f;
  if (row < R) {
    const float* xr = x + (size_t)row * C;
    const int cv = (C % VEC == 0) ? C / VEC : 0;  // vector part (whole row when C % VEC == 0)
    using T = typename Vec<VEC>::type;
    const T* xv = reinterpret_cast<const T*>(xr);
    for (int i = lane; i < cv; i += GROUP) acc += Vec<VEC>::sumsq(xv[i]);
    for (int i = cv * VEC + lane; i < C; i += GROUP) acc += xr[i] * xr[i];
  }
#pragma unroll
  for (int offset = GROUP / 2; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset, GROUP);
  if (row < R && lane == 0) y[row] = sqrtf(acc / C);
}

// args: X (input), then the output y.
KP_EXPORT int kp_forward(const kp_tensor* args, int num_args, cudaStream_t stream) {
  if (num_args != 2) return -1;
  const int R = static_cast<int>(args[0].shape[0]);
  const int C = static_cast<int>(args[0].shape[1]);
  constexpr int ROWS = THREADS / GROUP;
  row_rms_kernel<<<(R + ROWS - 1) / ROWS, THREADS, 0, stream>>>(
      static_cast<const float*>(args[0].data), static_cast<float*>(args[1].data), R, C);
  KP_RETURN_LAUNCH_STATUS();
}
