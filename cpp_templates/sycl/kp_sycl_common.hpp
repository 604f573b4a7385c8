// kernelpilot: shared helpers for the sycl-tla benchmark programs (Intel Xe).
//
// Why a header of our own: sycl-tla's examples initialise data with `initialize_block`, which pulls in
// oneMKL's device RNG (`cutlass/util/reference/device/sycl_tensor_fill.h`).  Our programs fill data with
// a counter-based hash in a plain SYCL kernel instead, so they need no oneMKL, and the same seed gives the
// same data on every device.  Everything here is deliberately small: argument parsing, random fill,
// host-side comparison, timing and the one JSON line every kernelpilot benchmark program prints.
//
// Exit codes (same as the CUDA backend, kernelpilot/tile_tuner/kernel_api.py):
//   0 ok, 2 bad arguments, 3 cannot run (no device, can_implement failed, launch error), 4 wrong result.
#pragma once

#include <sycl/sycl.hpp>
#include <cute/util/compat.hpp>
#include <cute/numeric/numeric_types.hpp>

#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
#include "cutlass/util/command_line.h"
#include "cutlass/util/device_memory.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kp {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;
constexpr int kExitCannotRun = 3;
constexpr int kExitWrongResult = 4;

/// Thrown for "the kernel cannot run this problem"; main() turns it into status cannot_run / exit 3.
struct CannotRun : std::exception {
  std::string what_;
  explicit CannotRun(std::string w) : what_(std::move(w)) {}
  const char* what() const noexcept override { return what_.c_str(); }
};

/// Thrown for bad command-line arguments; main() turns it into exit 2.
struct UsageError : std::exception {
  std::string what_;
  explicit UsageError(std::string w) : what_(std::move(w)) {}
  const char* what() const noexcept override { return what_.c_str(); }
};

// ------------------------------------------------------------------------------------------------
// JSON output
// ------------------------------------------------------------------------------------------------

inline std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

/// Finite test on the bits: icpx defaults to -fp-model=fast, which lets the compiler assume no NaN or
/// infinity exists and fold std::isfinite to true.  The programs are also built with -fhonor-nans
/// -fhonor-infinities; this test does not depend on it.
inline bool is_finite_bits(double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  return ((bits >> 52) & 0x7FFu) != 0x7FFu;
}

inline std::string json_number(double v) {
  if (!is_finite_bits(v)) return "null";  // JSON has no NaN/Inf; null means "not measured"
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

/// A JSON object built field by field (keys are trusted literals from the program itself).
class JsonObject {
 public:
  JsonObject& num(const char* key, double v) { return raw(key, json_number(v)); }
  JsonObject& integer(const char* key, long long v) { return raw(key, std::to_string(v)); }
  JsonObject& str(const char* key, const std::string& v) { return raw(key, "\"" + json_escape(v) + "\""); }
  JsonObject& boolean(const char* key, bool v) { return raw(key, v ? "true" : "false"); }
  JsonObject& raw(const char* key, const std::string& json) {
    if (!body_.empty()) body_ += ", ";
    body_ += "\"" + std::string(key) + "\": " + json;
    return *this;
  }
  std::string dump() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

inline std::string json_int_list(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// ------------------------------------------------------------------------------------------------
// Command line
// ------------------------------------------------------------------------------------------------

/// Reads an integer argument; `required` arguments without a value are a usage error.
inline int arg_int(const cutlass::CommandLine& cmd, const char* name, int fallback, bool required = false) {
  if (!cmd.check_cmd_line_flag(name)) {
    if (required) throw UsageError(std::string("missing required argument --") + name + "=<int>");
    return fallback;
  }
  int value = fallback;
  cmd.get_cmd_line_argument(name, value, fallback);
  return value;
}

inline std::string arg_str(const cutlass::CommandLine& cmd, const char* name, const std::string& fallback) {
  std::string value = fallback;
  if (cmd.check_cmd_line_flag(name)) cmd.get_cmd_line_argument(name, value, fallback);
  return value;
}

/// "1,2,3" -> {1,2,3}; anything that is not a positive integer list is a usage error.
inline std::vector<int> parse_int_list(const std::string& text, const char* name) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (end == item.c_str() || *end != '\0' || v < 0) {
      throw UsageError(std::string("--") + name + ": '" + item + "' is not a non-negative integer");
    }
    out.push_back(static_cast<int>(v));
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// Random data (never zeros) without oneMKL
// ------------------------------------------------------------------------------------------------

inline uint32_t mix64(uint64_t x) {
  // splitmix64 finaliser: a counter-based hash, so element i is the same for every launch order.
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x = x ^ (x >> 31);
  return static_cast<uint32_t>(x);
}

/// Nibble codes of small non-zero values of each 4-bit type (two's complement int4, uint4, e2m1).
template <class T> struct NibbleCodes;
template <> struct NibbleCodes<cutlass::int4b_t> {  // -4..-1, 1..4
  static constexpr uint8_t codes[8] = {0xC, 0xD, 0xE, 0xF, 0x1, 0x2, 0x3, 0x4};
};
template <> struct NibbleCodes<cutlass::uint4b_t> {  // 1..8
  static constexpr uint8_t codes[8] = {0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8};
};
template <> struct NibbleCodes<cutlass::float_e2m1_t> {  // +-0.5, +-1, +-1.5, +-2
  static constexpr uint8_t codes[8] = {0x1, 0x2, 0x3, 0x4, 0x9, 0xA, 0xB, 0xC};
};

template <class T> class KpFillNibbleKernel;

/// 4-bit types are stored two per byte; fill whole bytes with two random non-zero codes.
template <class T>
void fill_random_nibbles(T* ptr, size_t n, uint64_t seed) {
  size_t nbytes = (n + 1) / 2;
  if (nbytes == 0) return;
  uint8_t* bytes = reinterpret_cast<uint8_t*>(ptr);
  std::array<uint8_t, 8> codes;
  for (int i = 0; i < 8; ++i) codes[i] = NibbleCodes<T>::codes[i];
  compat::get_default_queue()
      .parallel_for<KpFillNibbleKernel<T>>(sycl::range<1>(nbytes),
                                           [=](sycl::id<1> idx) {
                                             uint32_t h = mix64(seed * 0x100000001B3ull + idx[0]);
                                             bytes[idx[0]] = uint8_t(codes[h & 7] | (codes[(h >> 3) & 7] << 4));
                                           })
      .wait();
}

template <class T> class KpFillKernel;

/// Fills `n` elements with v * scale, v uniform in [-range, -1] U [1, range] (unsigned types: [1, range]).
/// Small integers times a power of two are exact in every Xe input type (bf16, f16, tf32, e4m3, e5m2,
/// s8, u8), so products are exact and only the summation order separates kernel and reference.
template <class T>
void fill_random(T* ptr, size_t n, uint64_t seed, int range, float scale) {
  if (n == 0) return;
  if constexpr (cute::sizeof_bits_v<T> < 8) {
    fill_random_nibbles(ptr, n, seed);
    return;
  } else {
    // std::is_integral is false for cutlass's float wrappers (bfloat16_t, tfloat32_t, float_e4m3_t, ...).
    const bool is_unsigned = std::is_integral_v<T> && std::is_unsigned_v<T>;
    compat::get_default_queue()
        .parallel_for<KpFillKernel<T>>(sycl::range<1>(n),
                                       [=](sycl::id<1> idx) {
                                         uint64_t i = idx[0];
                                         uint32_t h = mix64(seed * 0x100000001B3ull + i);
                                         int v;
                                         if (is_unsigned) {
                                           v = 1 + static_cast<int>(h % static_cast<uint32_t>(range));
                                         } else {
                                           v = static_cast<int>(h % static_cast<uint32_t>(2 * range)) - range;
                                           if (v >= 0) v += 1;
                                         }
                                         ptr[i] = static_cast<T>(static_cast<float>(v) * scale);
                                       })
        .wait();
  }
}

/// Bytes occupied by n elements of T (sub-byte types included).
template <class T>
constexpr double bytes_of(double n) {
  return n * double(cute::sizeof_bits_v<T>) / 8.0;
}

/// ptr + n elements, correct for sub-byte types (where T* arithmetic would count bytes).
template <class T>
T* offset_ptr(T* ptr, int64_t n) {
  if constexpr (cute::sizeof_bits_v<T> < 8) {
    return reinterpret_cast<T*>(reinterpret_cast<uint8_t*>(ptr) + n * int64_t(cute::sizeof_bits_v<T>) / 8);
  } else {
    return ptr + n;
  }
}

template <class T>
std::vector<float> to_host_float(const T* dev, size_t n) {
  std::vector<T> tmp(n);
  if (n) compat::memcpy<T>(tmp.data(), dev, n);
  compat::wait();
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(tmp[i]);
  return out;
}

// ------------------------------------------------------------------------------------------------
// Comparison
// ------------------------------------------------------------------------------------------------

struct Comparison {
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;  // |got - ref| / max(|ref|, 1)
  size_t mismatches = 0;       // elements outside atol + rtol * |ref|, or not finite
  size_t count = 0;
  bool passed() const { return mismatches == 0 && count > 0; }
  void merge(const Comparison& o) {
    max_abs_error = std::max(max_abs_error, o.max_abs_error);
    max_rel_error = std::max(max_rel_error, o.max_rel_error);
    mismatches += o.mismatches;
    count += o.count;
  }
};

inline Comparison compare_host(const std::vector<float>& got, const std::vector<float>& ref, double rtol,
                               double atol) {
  Comparison c;
  c.count = std::min(got.size(), ref.size());
  if (got.size() != ref.size()) c.mismatches += 1;
  for (size_t i = 0; i < c.count; ++i) {
    double g = got[i], r = ref[i];
    double err = std::fabs(g - r);
    if (!is_finite_bits(g) || !is_finite_bits(r) || !is_finite_bits(err)) {  // any NaN/inf is a mismatch
      c.mismatches++;
      c.max_abs_error = std::numeric_limits<double>::infinity();
      c.max_rel_error = std::numeric_limits<double>::infinity();
      continue;
    }
    c.max_abs_error = std::max(c.max_abs_error, err);
    c.max_rel_error = std::max(c.max_rel_error, err / std::max(std::fabs(r), 1.0));
    if (err > atol + rtol * std::fabs(r)) c.mismatches++;
  }
  return c;
}

/// Device-resident outputs compared chunk by chunk, so an 8192 x 28672 output never needs 4 GB of host RAM.
template <class T>
Comparison compare_device(const T* got, const T* ref, size_t n, double rtol, double atol) {
  constexpr size_t kChunk = size_t(1) << 24;
  Comparison total;
  for (size_t begin = 0; begin < n; begin += kChunk) {
    size_t len = std::min(kChunk, n - begin);
    total.merge(compare_host(to_host_float(got + begin, len), to_host_float(ref + begin, len), rtol, atol));
  }
  if (n == 0) total.mismatches = 1;  // nothing compared is not a pass
  return total;
}

inline std::string check_entry(const std::string& name, const std::string& shape_json, const Comparison& c) {
  return JsonObject()
      .str("name", name)
      .raw("shape", shape_json)
      .boolean("passed", c.passed())
      .integer("elements", static_cast<long long>(c.count))
      .integer("mismatches", static_cast<long long>(c.mismatches))
      .num("max_abs_error", c.max_abs_error)
      .num("max_rel_error", c.max_rel_error)
      .dump();
}

// ------------------------------------------------------------------------------------------------
// Timing
// ------------------------------------------------------------------------------------------------

struct TimeStats {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int repetitions = 0;
  int iterations = 0;
};

/// Warm-up launches, then `repetitions` timed groups of `iterations` launches each; every group is
/// timed with a host clock between two queue drains, which also covers launches that carry no SYCL
/// event (sycl-tla launches event-less unless CUTLASS_SYCL_PROFILING_ENABLED is defined).
template <class Launch>
TimeStats time_launches(Launch&& launch, int warmup, int iterations, int repetitions, double target_ms = 0.0) {
  auto w0 = std::chrono::steady_clock::now();
  int warm = std::max(warmup, target_ms > 0 ? 1 : 0);
  for (int i = 0; i < warm; ++i) launch(i);
  compat::wait();
  if (target_ms > 0) {
    // --target_ms: size each timed group from the warm-up, so short kernels are timed over enough launches
    double est = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count() / warm;
    iterations = int(std::min(100000.0, std::max(1.0, std::ceil(target_ms / std::max(est, 1e-4)))));
  }
  std::vector<double> per_launch;
  per_launch.reserve(repetitions);
  int counter = 0;
  for (int r = 0; r < repetitions; ++r) {
    compat::wait();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) launch(counter++);
    compat::wait();
    auto t1 = std::chrono::steady_clock::now();
    per_launch.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() / iterations);
  }
  std::sort(per_launch.begin(), per_launch.end());
  TimeStats s;
  s.repetitions = repetitions;
  s.iterations = iterations;
  s.min_ms = per_launch.front();
  s.max_ms = per_launch.back();
  size_t m = per_launch.size();
  s.median_ms = (m % 2) ? per_launch[m / 2] : 0.5 * (per_launch[m / 2 - 1] + per_launch[m / 2]);
  return s;
}

/// The common timing options: --warmup, --iterations, --repetitions.
struct TimingOptions {
  int warmup = 10;
  int iterations = 20;
  int repetitions = 7;
  int target_ms = 0;  // > 0: iterations per repetition chosen so one repetition lasts about this long
  void parse(const cutlass::CommandLine& cmd) {
    warmup = arg_int(cmd, "warmup", warmup);
    iterations = arg_int(cmd, "iterations", iterations);
    repetitions = arg_int(cmd, "repetitions", repetitions);
    target_ms = arg_int(cmd, "target_ms", target_ms);
    if (warmup < 0 || iterations < 1 || repetitions < 1 || target_ms < 0) {
      throw UsageError("--warmup and --target_ms must be >= 0, --iterations and --repetitions >= 1");
    }
  }
  std::string json() const {
    return JsonObject()
        .integer("warmup", warmup)
        .integer("iterations", iterations)
        .integer("repetitions", repetitions)
        .integer("target_ms", target_ms)
        .dump();
  }
};

/// How many operand sets to cycle through while timing, so the last-level cache does not flatter small
/// problems: --rotate=R if given, else enough sets to stream twice --l2_mib, at most 16 (1 without either).
inline int rotation_count(const cutlass::CommandLine& cmd, double operand_bytes) {
  int rotate = arg_int(cmd, "rotate", 0);
  int l2_mib = arg_int(cmd, "l2_mib", 0);
  if (rotate <= 0) {
    rotate = l2_mib > 0 ? int(std::ceil(2.0 * l2_mib * 1048576.0 / std::max(operand_bytes, 1.0))) : 1;
  }
  return std::max(1, std::min(rotate, 16));
}

/// time_launches with the parsed options.
template <class Launch>
TimeStats time_with(Launch&& launch, const TimingOptions& t) {
  return time_launches(std::forward<Launch>(launch), t.warmup, t.iterations, t.repetitions, double(t.target_ms));
}

// ------------------------------------------------------------------------------------------------
// Result line
// ------------------------------------------------------------------------------------------------

struct Result {
  std::string status = "cannot_run";  // ok | wrong_result | cannot_run
  std::string kernel;
  std::string config_json = "{}";
  std::string problem_json = "{}";
  std::string runtime_json = "{}";
  bool timed = false;
  TimeStats time;
  double flops = 0.0;  // useful flops of one launch
  double bytes = 0.0;  // minimum bytes moved by one launch
  bool verified = false;
  bool verification_passed = false;
  double max_error = 0.0;
  std::vector<std::string> checked;
  std::string reference;
  std::string message;
  std::string device;
  std::string library_version;

  int print_and_exit_code() const {
    JsonObject o;
    o.str("status", status).str("kernel", kernel).raw("config", config_json).raw("problem", problem_json);
    o.raw("runtime", runtime_json);
    if (timed && time.median_ms > 0) {
      o.raw("time_ms", JsonObject()
                           .num("median", time.median_ms)
                           .num("min", time.min_ms)
                           .num("max", time.max_ms)
                           .integer("repetitions", time.repetitions)
                           .dump());
      o.integer("iterations_per_repetition", time.iterations);
      o.num("tflops", flops / (time.median_ms * 1e-3) * 1e-12);
      o.num("gbps", bytes / (time.median_ms * 1e-3) * 1e-9);
    }
    if (verified) {
      std::string list = "[";
      for (size_t i = 0; i < checked.size(); ++i) list += (i ? ", " : "") + checked[i];
      list += "]";
      o.raw("verification", JsonObject()
                                .boolean("passed", verification_passed)
                                .num("max_error", max_error)
                                .raw("checked", list)
                                .str("reference", reference)
                                .dump());
    }
    o.str("message", message).str("device", device).str("library_version", library_version);
    // fputs, not printf: cute/util/print.hpp #defines printf as sycl::ext::oneapi::experimental::printf
    std::fputs((o.dump() + "\n").c_str(), stdout);
    std::fflush(stdout);
    if (status == "ok") return kExitOk;
    if (status == "wrong_result") return kExitWrongResult;
    return kExitCannotRun;
  }
};

/// Name of the device the default queue runs on; throws CannotRun when there is no GPU.
inline std::string device_name_or_throw() {
  sycl::device dev = compat::get_default_queue().get_device();
  if (!dev.is_gpu()) {
    throw CannotRun("the default SYCL device is not a GPU (" + dev.get_info<sycl::info::device::name>() +
                    "); set ONEAPI_DEVICE_SELECTOR=level_zero:gpu");
  }
  return dev.get_info<sycl::info::device::name>();
}

/// Runs `body(result)` and maps every failure onto the contract's status and exit code.
template <class Body>
int run_program(Result& result, Body&& body) {
  try {
    body(result);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "usage error: %s\n", e.what());
    return kExitUsage;
  } catch (const CannotRun& e) {
    result.status = "cannot_run";
    result.message = e.what();
  } catch (const sycl::exception& e) {
    result.status = "cannot_run";
    result.message = std::string("SYCL exception: ") + e.what();
  } catch (const std::exception& e) {
    result.status = "cannot_run";
    result.message = std::string("exception: ") + e.what();
  }
  return result.print_and_exit_code();
}

}  // namespace kp
