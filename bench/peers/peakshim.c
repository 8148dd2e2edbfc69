// A malloc interposer that counts live heap bytes and their peak (LD_PRELOAD), so a benchmark can
// measure the peak a PyTorch step adds on the CPU (PyTorch keeps no CPU memory statistics).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

static _Atomic long long live_bytes, peak_bytes;

extern void* __libc_malloc(size_t);
extern void __libc_free(void*);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

static void add(void* p) {
  if (!p) return;
  long long n = (long long)malloc_usable_size(p);
  long long now = atomic_fetch_add(&live_bytes, n) + n;
  long long pk = atomic_load(&peak_bytes);
  while (now > pk && !atomic_compare_exchange_weak(&peak_bytes, &pk, now)) {}
}
static void sub(void* p) {
  if (p) atomic_fetch_sub(&live_bytes, (long long)malloc_usable_size(p));
}

void* malloc(size_t n) { void* p = __libc_malloc(n); add(p); return p; }
void free(void* p) { sub(p); __libc_free(p); }
void* calloc(size_t a, size_t b) { void* p = __libc_calloc(a, b); add(p); return p; }
void* realloc(void* q, size_t n) { sub(q); void* p = __libc_realloc(q, n); add(p ? p : (n ? q : NULL)); return p; }
void* memalign(size_t al, size_t n) { void* p = __libc_memalign(al, n); add(p); return p; }
void* aligned_alloc(size_t al, size_t n) { return memalign(al, n); }
int posix_memalign(void** out, size_t al, size_t n) {
  void* p = __libc_memalign(al, n);
  if (!p) return 12;
  add(p);
  *out = p;
  return 0;
}
void* valloc(size_t n) { return memalign(4096, n); }

long long peakshim_live(void) { return atomic_load(&live_bytes); }
long long peakshim_peak(void) { return atomic_load(&peak_bytes); }
void peakshim_reset(void) { atomic_store(&peak_bytes, atomic_load(&live_bytes)); }
