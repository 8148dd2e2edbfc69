#pragma once
// Whether this test binary was built under a sanitizer: resident-set and address-space figures
// mean nothing there (shadow memory is mapped beside every touched page).

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

}  // namespace strata::testing_util
