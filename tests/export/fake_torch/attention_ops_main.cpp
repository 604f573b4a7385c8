// Runs the host side of an exported attention_ops.cpp over the metadata-only tensors of ATen/ATen.h in
// this folder: the operator's decision, the tensors it makes and the launches it asks for, with the kernels
// replaced by a recorder.  Built with -DKP_NS=<exported name> and the export's include/ and csrc/ on the
// include path.  Reads one request per line on stdin, prints one JSON object per line:
//   call <vendor|nearest|error> <causal 0|1> B Hq Hkv Sq Skv D <bhsd|bshd>
//       explain_attention, then attention(q, k, v, causal): launches, allocations during the call
//       (address, bytes, still referenced after it returned), vendor calls, the exception if any
//   guard B Hq Skv D      expanded_kv_ok(B, Hq, Skv, D)
#include "attention_ops.cpp"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace KP_NS {

int device_major(int) { return 9; }

std::vector<AttentionLaunch>& launches() {
  static std::vector<AttentionLaunch> log;
  return log;
}

std::size_t attention_workspace_bytes(int, const AttentionLaunch&) { return 0; }

int attention_run(int, const AttentionLaunch& c, void*, std::size_t) {
  launches().push_back(c);
  return kAttentionStatusOk;
}

}  // namespace KP_NS

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

long long address(const void* p) { return static_cast<long long>(reinterpret_cast<std::uintptr_t>(p)); }

// [B, H, S, D] contiguous, or the [B, S, H, D] storage seen as [B, H, S, D]
at::Tensor input(long long b, long long h, long long s, long long d, bool bshd) {
  if (bshd) return fake::strided({b, h, s, d}, {s * h * d, d, h * d, 1});
  return fake::strided({b, h, s, d}, {h * s * d, s * d, d, 1});
}

void call(std::istringstream& in) {
  std::string policy, layout;
  int causal = 0;
  long long b, hq, hkv, sq, skv, d;
  in >> policy >> causal >> b >> hq >> hkv >> sq >> skv >> d >> layout;
  using KP_NS::Fallback;
  const Fallback f = policy == "vendor" ? Fallback::vendor : policy == "nearest" ? Fallback::nearest : Fallback::error;
  KP_NS::fallback_policy().store(static_cast<int>(f));
  const at::Tensor q = input(b, hq, sq, d, layout == "bshd"), k = input(b, hkv, skv, d, layout == "bshd"),
                   v = input(b, hkv, skv, d, layout == "bshd");
  const std::string explain = KP_NS::explain_attention(q, k, v, causal != 0);
  fake::allocations().clear();
  fake::vendor_calls() = 0;
  KP_NS::launches().clear();
  std::string error;
  at::Tensor out;
  try {
    out = KP_NS::attention(q, k, v, causal != 0);
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::ostringstream s;
  s << "{\"explain\": " << quoted(explain) << ", \"error\": " << (error.empty() ? "null" : quoted(error))
    << ", \"vendor_calls\": " << fake::vendor_calls() << ", \"q\": " << address(q.data_ptr())
    << ", \"k\": " << address(k.data_ptr()) << ", \"v\": " << address(v.data_ptr())
    << ", \"out\": " << (out.dim() ? address(out.data_ptr()) : 0) << ", \"out_contiguous\": "
    << (out.dim() && out.is_contiguous() ? "true" : "false") << ", \"allocations\": [";
  for (std::size_t i = 0; i < fake::allocations().size(); ++i) {
    const fake::Allocation& a = fake::allocations()[i];
    s << (i ? ", " : "") << "[" << a.base << ", " << a.bytes << ", " << (a.live ? "true" : "false") << "]";
  }
  s << "], \"launches\": [";
  for (std::size_t i = 0; i < KP_NS::launches().size(); ++i) {
    const KP_NS::AttentionLaunch& c = KP_NS::launches()[i];
    s << (i ? ", " : "") << "{\"q\": " << address(c.q) << ", \"k\": " << address(c.k) << ", \"v\": " << address(c.v)
      << ", \"o\": " << address(c.o) << ", \"b\": " << c.b << ", \"h\": " << c.h << ", \"q_rows\": " << c.q_rows
      << ", \"k_rows\": " << c.k_rows << ", \"head_dim\": " << c.head_dim << ", \"q_stride\": [" << c.q_row << ", "
      << c.q_b << ", " << c.q_h << "], \"k_stride\": [" << c.k_row << ", " << c.k_b << ", " << c.k_h
      << "], \"v_stride\": [" << c.v_row << ", " << c.v_b << ", " << c.v_h << "], \"o_stride\": [" << c.o_row << ", "
      << c.o_b << ", " << c.o_h << "], \"lse\": [" << c.lse_b << ", " << c.lse_h << "]}";
  }
  s << "]}";
  std::cout << s.str() << std::endl;
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string what;
    in >> what;
    if (what == "call") {
      call(in);
    } else if (what == "guard") {
      long long b, hq, skv, d;
      in >> b >> hq >> skv >> d;
      std::cout << (KP_NS::expanded_kv_ok(b, hq, skv, d) ? "true" : "false") << std::endl;
    }
  }
  return 0;
}
