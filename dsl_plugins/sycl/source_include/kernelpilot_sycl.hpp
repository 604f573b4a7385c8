// kernelpilot SYCL source-kernel contract (ABI version 1).
//
// A SYCL kernel file for `kernelpilot optimize` is ONE C++ translation unit that includes this header
// and defines
//
//     KP_EXPORT int kp_forward(sycl::queue* q, const kp_tensor* args, int num_args);
//
// kernelpilot compiles it with `icpx -fsycl` together with its runner (kernelpilot_sycl_runner.cpp)
// into one program.  `args` holds, in this order: the forward inputs (spec `params` order), the PyTorch
// reference Model's parameters/buffers (state_dict order), then the outputs (pre-filled with NaN /
// the integer max so unwritten elements show).  Pointers are USM device allocations on `q`'s device.
// Submit work to `q` and return 0 (or a non-zero error code); do not wait -- the runner waits and
// times whole calls.  Tunables are `#define NAME <int>` inside `#ifndef NAME` or `constexpr int NAME = <int>;`.
#pragma once

#include <sycl/sycl.hpp>

#include "kernelpilot_tensor.hpp"
