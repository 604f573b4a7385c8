"""Row-wise softmax of X [R, C] (float32) as a torch extension built with ``load_inline``.

The CUDA source is the string ``CUDA_SRC``; ``load_inline`` compiles it (with the binding declared in
``CPP_SRC``) the first time the module is imported.  GROUP threads cooperate on one row (strided
loads, shuffle reductions inside the group); a block of THREADS threads handles THREADS / GROUP rows;
VEC floats are loaded per instruction (float4 when VEC == 4).  The defaults -- one thread per row,
scalar loads, three passes -- are the naive starting point: neighbouring threads read addresses C
floats apart, so no load is coalesced.  The spec's ``tunables:`` section declares the search space.
"""

import torch
from torch.utils.cpp_extension import load_inline

CPP_SRC = "torch::Tensor softmax_forward(torch::Tensor x, int64_t stream);"

CUDA_SRC = r"""
#include <cfloat>

#ifndef THREADS
#define THREADS 128
#endif
#ifndef GROUP
#define GROUP 1
#endif
#ifndef VEC
#define VEC 1
#endif

template <int V> struct Vec;
template <> struct Vec<1> {
  using type = float;
  __device__ static float max(type v) { return v; }
  __device__ static float sum_exp(type v, float m) { return __expf(v - m); }
  __device__ static type exp_scale(type v, float m, float s) { return __expf(v - m) * s; }
};
template <> struct Vec<2> {
  using type = float2;
  __device__ static float max(type v) { return fmaxf(v.x, v.y); }
  __device__ static float sum_exp(type v, float m) { return __expf(v.x - m) + __expf(v.y - m); }
  __device__ static type exp_scale(type v, float m, float s) {
    return make_float2(__expf(v.x - m) * s, __expf(v.y - m) * s);
  }
};
template <> struct Vec<4> {
  using type = float4;
  __device__ static float max(type v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }
  __device__ static float sum_exp(type v, float m) {
    return __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);
  }
  __device__ static type exp_scale(type v, float m, float s) {
    return make_float4(__expf(v.x - m) * s, __expf(v.y - m) * s, __expf(v.z - m) * s, __expf(v.w - m) * s);
  }
};

__global__ void __launch_bounds__(THREADS) softmax_kernel(const float* x, float* y, int R, int C) {
  constexpr int ROWS = THREADS / GROUP;
  const int lane = threadIdx.x % GROUP;
  const int row = blockIdx.x * ROWS + threadIdx.x / GROUP;
  const bool active = row < R;
  using T = typename Vec<VEC>::type;
  const float* xr = x + (size_t)(active ? row : 0) * C;
  float* yr = y + (size_t)(active ? row : 0) * C;
  const int cv = (C % VEC == 0) ? C / VEC : 0;  // vector part (whole row when C % VEC == 0)
  const T* xv = reinterpret_cast<const T*>(xr);

  float m = -FLT_MAX;
  if (active) {
    for (int i = lane; i < cv; i += GROUP) m = fmaxf(m, Vec<VEC>::max(xv[i]));
    for (int i = cv * VEC + lane; i < C; i += GROUP) m = fmaxf(m, xr[i]);
  }
#pragma unroll
  for (int offset = GROUP / 2; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset, GROUP));

  float s = 0.0f;
  if (active) {
    for (int i = lane; i < cv; i += GROUP) s += Vec<VEC>::sum_exp(xv[i], m);
    for (int i = cv * VEC + lane; i < C; i += GROUP) s += __expf(xr[i] - m);
  }
#pragma unroll
  for (int offset = GROUP / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset, GROUP);

  if (active) {
    const float inv = 1.0f / s;
    T* yv = reinterpret_cast<T*>(yr);
    for (int i = lane; i < cv; i += GROUP) yv[i] = Vec<VEC>::exp_scale(xv[i], m, inv);
    for (int i = cv * VEC + lane; i < C; i += GROUP) yr[i] = __expf(xr[i] - m) * inv;
  }
}

// stream: torch.cuda.current_stream().cuda_stream, passed from Python (keeps this file free of the
// c10/cuda headers, so its syntax check also works against a CPU build of torch)
torch::Tensor softmax_forward(torch::Tensor x, int64_t stream) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat, "x: 2-D float32 CUDA tensor");
  x = x.contiguous();
  auto y = torch::empty_like(x);
  const int R = static_cast<int>(x.size(0));
  const int C = static_cast<int>(x.size(1));
  constexpr int ROWS = THREADS / GROUP;
  softmax_kernel<<<(R + ROWS - 1) / ROWS, THREADS, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), R, C);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "softmax_kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_ext = load_inline(
    name="kp_inline_softmax",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class Model(torch.nn.Module):
    def forward(self, X):
        return _ext.softmax_forward(X, torch.cuda.current_stream().cuda_stream)
