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

#include <cuda_runtime.h>

// kp_tensor, kp_dtype, KP_ABI_VERSION, KP_MAX_DIMS, KP_EXPORT: the ABI every C++ source DSL shares
// (generated from kernelpilot/cpp_source/abi.py; nvcc gets its folder with -I).
#include "kernelpilot_tensor.hpp"

// kernelpilot checks the ABI version of the library before calling kp_forward.
KP_EXPORT int kp_abi_version(void) { return KP_ABI_VERSION; }

// Convenience: return the launch error (if any) from kp_forward.
#define KP_RETURN_LAUNCH_STATUS() return static_cast<int>(cudaGetLastError())
