// kernelpilot CUDA source-kernel contract (ABI version 1).
//
// A CUDA kernel file for `kernelpilot optimize` is ONE .cu translation unit that includes this header
// and defines the entry point
//
//     KP_EXPORT int kp_forward(const kp_tensor* args, int num_args, cudaStream_t stream);
//
// kernelpilot compiles the file with nvcc into a shared library, loads it in a worker process and
// calls kp_forward once per forward pass.  `args` holds, in this order:
//   1. the forward inputs, in the order of the spec variant's `params` (all of `inputs` if absent);
//   2. the parameters and buffers of the PyTorch reference Model (`<kernel>_pytorch.py`), in its
//      state_dict order (e.g. `weight`, `bias`), already cast to the variant dtype;
//   3. the outputs: one contiguous tensor per tensor the reference's forward returns, same shape and
//      dtype, pre-filled with NaN (floats) or the type's max value (integers) so unwritten elements show.
// All pointers are device pointers on the current CUDA device; every tensor is contiguous (strides in
// elements are given anyway).  Launch on `stream`.  Return 0 on success, or a non-zero code (e.g. a
// cudaError_t) that kernelpilot reports as a runtime error.  kp_forward must not synchronize the device
// (it is timed with CUDA events) and must not allocate per call unless it has to.
//
// Tunables (the spec's `tunables:` section) are compile-time constants declared as
//     #ifndef BLOCK_M
//     #define BLOCK_M 64
//     #endif
// (or `constexpr int BLOCK_M = 64;`); the autotuning stage rewrites the value.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#define KP_ABI_VERSION 1
#define KP_MAX_DIMS 8

// dtype codes (kernelpilot.dsl_plugins.cuda.source_abi.DTYPE_CODES mirrors them)
enum kp_dtype : int32_t {
  KP_FLOAT16 = 0,
  KP_BFLOAT16 = 1,
  KP_FLOAT32 = 2,
  KP_FLOAT64 = 3,
  KP_INT8 = 4,
  KP_INT16 = 5,
  KP_INT32 = 6,
  KP_INT64 = 7,
  KP_UINT8 = 8,
  KP_BOOL = 9,
  KP_FLOAT8_E4M3 = 10,
  KP_FLOAT8_E5M2 = 11,
};

struct kp_tensor {
  void* data;
  int32_t dtype;                // kp_dtype
  int32_t ndim;
  int64_t shape[KP_MAX_DIMS];
  int64_t stride[KP_MAX_DIMS];  // in elements
};

#define KP_EXPORT extern "C" __attribute__((visibility("default")))

// kernelpilot checks the ABI version of the library before calling kp_forward.
KP_EXPORT int kp_abi_version(void) { return KP_ABI_VERSION; }

// Convenience: return the launch error (if any) from kp_forward.
#define KP_RETURN_LAUNCH_STATUS() return static_cast<int>(cudaGetLastError())
