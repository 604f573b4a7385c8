// kernelpilot's SYCL runner: file I/O contract (kp_io.hpp) around a kernel's kp_forward.
// Built together with the kernel file:  icpx -fsycl ... kernelpilot_sycl_runner.cpp kernel.cpp -o prog
#include <chrono>
#include <string>
#include <vector>

#include "kernelpilot_sycl.hpp"
#include "kp_io.hpp"

KP_EXPORT int kp_forward(sycl::queue* q, const kp_tensor* args, int num_args);

int main(int argc, char** argv) {
  const kp_io::Args a = kp_io::parse_args(argc, argv);
  const std::vector<kp_io::Entry> entries = kp_io::read_manifest(a.input_dir);
  sycl::queue q{sycl::default_selector_v, sycl::property_list{sycl::property::queue::in_order{}}};
  const std::string device = q.get_device().get_info<sycl::info::device::name>();

  std::vector<void*> buffers;
  std::vector<kp_tensor> tensors;
  for (const auto& e : entries) {
    std::vector<char> host = kp_io::read_bytes(a.input_dir + "/" + e.file, e.nbytes);
    void* dev = sycl::malloc_device(e.nbytes > 0 ? e.nbytes : 1, q);
    if (e.nbytes > 0) q.memcpy(dev, host.data(), e.nbytes);
    buffers.push_back(dev);
    tensors.push_back(kp_io::describe(e, dev));
  }
  q.wait();

  int status = kp_forward(&q, tensors.data(), static_cast<int>(tensors.size()));
  q.wait_and_throw();
  std::vector<double> samples;
  if (status == 0) {
    for (const auto& e : entries) {
      if (e.role != "output") continue;
      std::vector<char> host(e.nbytes);
      q.memcpy(host.data(), buffers[e.index], e.nbytes).wait();
      kp_io::write_bytes(a.output_dir + "/" + e.file, host.data(), e.nbytes);
    }
    for (int i = 0; i < a.warmup + a.reps && status == 0; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      status = kp_forward(&q, tensors.data(), static_cast<int>(tensors.size()));
      q.wait_and_throw();
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= a.warmup) samples.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  kp_io::write_result(a.output_dir, status, device, samples);
  for (void* p : buffers) sycl::free(p, q);
  return status == 0 ? 0 : 4;
}
