// A metadata-only stand-in for the parts of ATen the exported operator sources use, so that their host
// logic (decisions, views, copies, launch arguments) compiles with g++ and runs on a machine without
// CUDA or a CUDA build of torch.  Tensors have sizes, strides, a dtype, a device and an address in a
// fake address space; no element is ever stored.  Every allocation is logged with whether it is still
// referenced (fake::allocations), so a test can see which copies a call makes and which outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace c10 {

enum class ScalarType { BFloat16, Half, Float, Byte };

inline std::ostream& operator<<(std::ostream& s, ScalarType t) {
  const char* names[] = {"BFloat16", "Half", "Float", "Byte"};
  return s << names[static_cast<int>(t)];
}

struct Device {
  bool cuda = true;
  int index = 0;
  bool operator==(const Device& o) const { return cuda == o.cuda && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline std::ostream& operator<<(std::ostream& s, const Device& d) {
  return d.cuda ? s << "cuda:" << d.index : s << "cpu";
}

}  // namespace c10

namespace fake {

struct Allocation {
  std::uintptr_t base;
  long long bytes;
  bool live;
};

// every allocation since the last clear, in order, and whether its storage is still referenced
inline std::vector<Allocation>& allocations() {
  static std::vector<Allocation> log;
  return log;
}

// one allocation's storage: freed (marked not live) when the last tensor over it goes
struct Storage {
  std::uintptr_t base;
  explicit Storage(long long bytes) {
    static std::uintptr_t next = std::uintptr_t(1) << 20;
    base = next;
    next += (static_cast<std::uintptr_t>(bytes) / 512 + 2) * 512;  // 512-byte aligned, never adjacent
    allocations().push_back({base, bytes, true});
  }
  ~Storage() {
    for (Allocation& a : allocations())
      if (a.base == base) a.live = false;
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

inline long long& vendor_calls() {
  static long long n = 0;
  return n;
}

}  // namespace fake

namespace at {

using c10::ScalarType;
inline constexpr ScalarType kBFloat16 = ScalarType::BFloat16, kHalf = ScalarType::Half, kFloat = ScalarType::Float,
                            kByte = ScalarType::Byte;
// sizes and strides (a class of at::, so that operator<< below is found from any namespace)
struct Shape : std::vector<int64_t> {
  using std::vector<int64_t>::vector;
};

inline std::ostream& operator<<(std::ostream& s, const Shape& v) {
  s << "[";
  for (std::size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  return s << "]";
}

inline int64_t element_size_of(ScalarType t) {
  return t == ScalarType::Float ? 4 : t == ScalarType::Byte ? 1 : 2;
}

struct TensorOptions {
  ScalarType dtype_ = ScalarType::BFloat16;
  c10::Device device_{};
  TensorOptions dtype(ScalarType t) const {
    TensorOptions o = *this;
    o.dtype_ = t;
    return o;
  }
};

inline Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t n = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    st[i] = n;
    n *= sizes[i] > 0 ? sizes[i] : 1;
  }
  return st;
}

class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape sizes, Shape strides, int64_t offset, std::shared_ptr<fake::Storage> storage, TensorOptions o)
      : sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(offset), storage_(std::move(storage)), opt_(o) {}

  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t size(int64_t i) const { return sizes_.at(wrap(i)); }
  int64_t stride(int64_t i) const { return strides_.at(wrap(i)); }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes_) n *= s;
    return n;
  }
  ScalarType scalar_type() const { return opt_.dtype_; }
  c10::Device device() const { return opt_.device_; }
  bool is_cuda() const { return opt_.device_.cuda; }
  int get_device() const { return opt_.device_.cuda ? opt_.device_.index : -1; }
  int64_t element_size() const { return element_size_of(opt_.dtype_); }
  TensorOptions options() const { return opt_; }
  void* data_ptr() const { return reinterpret_cast<void*>(storage_->base + offset_ * element_size()); }
  template <class T>
  T* data_ptr() const {
    return static_cast<T*>(data_ptr());
  }

  // torch's rule: size-1 dimensions' strides do not matter
  bool is_contiguous() const {
    int64_t expected = 1;
    for (std::size_t i = sizes_.size(); i-- > 0;) {
      if (sizes_[i] == 1) continue;
      if (strides_[i] != expected) return false;
      expected *= sizes_[i];
    }
    return true;
  }

  // a view needs a contiguous tensor here (stricter than torch, which also views some strided ones)
  Tensor view(Shape sizes) const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    if (!is_contiguous() || n != numel()) throw std::runtime_error("fake view of a strided tensor or another numel");
    Shape st = contiguous_strides(sizes);
    return Tensor(std::move(sizes), std::move(st), offset_, storage_, opt_);
  }

  Tensor narrow(int64_t d, int64_t start, int64_t length) const {
    Tensor t = *this;
    t.offset_ += start * strides_.at(wrap(d));
    t.sizes_.at(wrap(d)) = length;
    return t;
  }

  Tensor unsqueeze(int64_t d) const {
    Tensor t = *this;
    const int64_t st = d < dim() ? strides_[d] * sizes_[d] : 1;
    t.sizes_.insert(t.sizes_.begin() + d, 1);
    t.strides_.insert(t.strides_.begin() + d, st);
    return t;
  }

  Tensor expand(Shape sizes) const {
    if (static_cast<int64_t>(sizes.size()) != dim()) throw std::runtime_error("fake expand changes the rank");
    Tensor t = *this;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == sizes_[i]) continue;
      if (sizes_[i] != 1) throw std::runtime_error("fake expand of a dimension that is not 1");
      t.sizes_[i] = sizes[i];
      t.strides_[i] = 0;
    }
    return t;
  }

  Tensor contiguous() const {
    if (is_contiguous()) return *this;
    Shape st = contiguous_strides(sizes_);
    return Tensor(sizes_, std::move(st), 0, std::make_shared<fake::Storage>(numel() * element_size()), opt_);
  }

  Tensor& copy_(const Tensor& src) {
    if (src.sizes_ != sizes_) throw std::runtime_error("fake copy_ between shapes");
    return *this;
  }

 private:
  std::size_t wrap(int64_t i) const { return static_cast<std::size_t>(i < 0 ? i + dim() : i); }

  Shape sizes_, strides_;
  int64_t offset_ = 0;
  std::shared_ptr<fake::Storage> storage_;
  TensorOptions opt_{};
};

inline Tensor empty(Shape sizes, TensorOptions o) {
  Shape st = contiguous_strides(sizes);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return Tensor(sizes, std::move(st), 0, std::make_shared<fake::Storage>(n * element_size_of(o.dtype_)), o);
}

inline Tensor zeros(Shape sizes, TensorOptions o) { return empty(std::move(sizes), o); }

// the vendor path: counted, and a contiguous result of q's shape
inline Tensor scaled_dot_product_attention(const Tensor& q, const Tensor&, const Tensor&,
                                           const std::optional<Tensor>& = {}, double = 0.0, bool = false,
                                           std::optional<double> = std::nullopt, bool = false) {
  ++fake::vendor_calls();
  return empty(q.sizes(), q.options());
}

}  // namespace at

namespace fake {

// a tensor of `sizes` and `strides` over its own allocation (what a test feeds the operator)
inline at::Tensor strided(at::Shape sizes, at::Shape strides, at::TensorOptions o = {}) {
  int64_t last = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) last += (sizes[i] - 1) * strides[i];
  auto storage = std::make_shared<Storage>((last + 1) * at::element_size_of(o.dtype_));
  return at::Tensor(std::move(sizes), std::move(strides), 0, std::move(storage), o);
}

}  // namespace fake

namespace fake_detail {
template <class... A>
std::string concat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}
}  // namespace fake_detail

#define TORCH_CHECK(cond, ...)                                                    \
  do {                                                                            \
    if (!(cond)) throw std::runtime_error(fake_detail::concat(__VA_ARGS__));      \
  } while (0)
