#pragma once
// Whether this test binary was built under a sanitizer: resident-set and address-space figures
// mean nothing there (shadow memory is mapped beside every touched page), and ThreadSanitizer's
// slowdown makes some sizes cost minutes without checking more.

namespace strata::testing_util {

/// True in a build under AddressSanitizer or ThreadSanitizer.
constexpr bool sanitized_build() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

/// True in a build under ThreadSanitizer, where code runs 5-20x slower: a test may size a model
/// down there when its size adds nothing to what ThreadSanitizer checks (the threads it runs).
constexpr bool thread_sanitized_build() {
#if defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

}  // namespace strata::testing_util
