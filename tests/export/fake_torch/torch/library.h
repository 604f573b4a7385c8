// Stand-in for torch's operator registration: the blocks compile to unused functions, so a test calls
// the operator's functions directly (it includes the operator's .cpp).
#pragma once

namespace fake {
struct Library {
  template <class... A>
  void def(A&&...) {}
  template <class... A>
  void impl(A&&...) {}
};
}  // namespace fake

#define FAKE_TORCH_CAT2(a, b) a##b
#define FAKE_TORCH_CAT(a, b) FAKE_TORCH_CAT2(a, b)
#define TORCH_LIBRARY_FRAGMENT(ns, m) [[maybe_unused]] static void FAKE_TORCH_CAT(fake_fragment_, __LINE__)(fake::Library & m)
#define TORCH_LIBRARY_IMPL(ns, key, m) [[maybe_unused]] static void FAKE_TORCH_CAT(fake_impl_, __LINE__)(fake::Library & m)
