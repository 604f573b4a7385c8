// Stand-in for c10's device guard (see ATen/ATen.h of this folder).
#pragma once

#include <ATen/ATen.h>

namespace c10::cuda {
struct CUDAGuard {
  explicit CUDAGuard(c10::Device) {}
};
}  // namespace c10::cuda
