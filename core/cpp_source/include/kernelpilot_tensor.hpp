// kp_tensor: the tensor descriptor between kernelpilot and C++ source kernels (CUDA, SYCL, ...).
// GENERATED from kernelpilot/cpp_source/abi.py (python -m kernelpilot.cpp_source.abi); do not edit.
// Plain C++ (no CUDA or SYCL), so the ABI can be tested with any C++17 compiler.
#pragma once

#include <cstdint>

#define KP_ABI_VERSION 1
#define KP_MAX_DIMS 8

// dtype codes (kernelpilot.cpp_source.abi.DTYPE_CODES: the same numbers for every DSL)
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
  void* data;                   // device pointer (CUDA) or USM pointer (SYCL runner)
  int32_t dtype;                // kp_dtype
  int32_t ndim;
  int64_t shape[KP_MAX_DIMS];
  int64_t stride[KP_MAX_DIMS];  // in elements
};

#define KP_EXPORT extern "C" __attribute__((visibility("default")))
