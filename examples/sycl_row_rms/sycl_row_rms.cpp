// y[r] = sqrt(mean(x[r, :]^2)) over X [R, C] float32 (row-major), y [R] -- the SYCL twin of
// examples/cuda_row_rms.  GROUP work-items share a row (strided loads, then a sub-group reduction);
// a work-group of WG work-items handles WG / GROUP rows.  Defaults: one work-item per row (naive).
// Built by kernelpilot with icpx together with its runner (file I/O contract, see
// docs/cuda_sycl_sources.md); NOT yet run on Intel hardware.
#include "kernelpilot_sycl.hpp"

#ifndef WG
#define WG 128
#endif
#ifndef GROUP
#define GROUP 1
#endif

KP_EXPORT int kp_forward(sycl::queue* q, const kp_tensor* args, int num_args) {
  if (num_args != 2) return -1;
  const int R = static_cast<int>(args[0].shape[0]);
  const int C = static_cast<int>(args[0].shape[1]);
  const float* x = static_cast<const float*>(args[0].data);
  float* y = static_cast<float*>(args[1].data);
  constexpr int ROWS = WG / GROUP;
  const size_t groups = (R + ROWS - 1) / ROWS;
  q->parallel_for(sycl::nd_range<1>{groups * WG, WG}, [=](sycl::nd_item<1> it) [[sycl::reqd_sub_group_size(16)]] {
    const int local = static_cast<int>(it.get_local_id(0));
    const int lane = local % GROUP;
    const int row = static_cast<int>(it.get_group(0)) * ROWS + local / GROUP;
    float acc = 0.0f;
    if (row < R) {
      for (int c = lane; c < C; c += GROUP) acc += x[(size_t)row * C + c] * x[(size_t)row * C + c];
    }
    // reduce inside the GROUP lanes of this row (GROUP divides the sub-group size 16)
    auto sg = it.get_sub_group();
    for (int offset = GROUP / 2; offset > 0; offset /= 2) acc += sycl::permute_group_by_xor(sg, acc, offset);
    if (row < R && lane == 0) y[row] = sycl::sqrt(acc / C);
  });
  return 0;
}
