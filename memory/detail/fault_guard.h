#pragma once
/// @file
/// SIGBUS on slow-tier memory (Note [Slow-tier faults]): page-touching under a guard that turns a
/// fault into a return value, and a process-wide handler that turns a fault nobody guarded into a
/// message naming the heap and an exit status, instead of a bare "Bus error".

#include <cstddef>
#include <string>

namespace strata::memory {

/// Exit status of a process killed by an unguarded fault on a registered range (EX_IOERR).
inline constexpr int kSlowTierFaultExitCode = 74;

/// Registers [base, base + bytes) as memory of the heap `what` (e.g. "pm:mmap:/mnt/slow"); a
/// SIGBUS inside it prints what happened and exits with kSlowTierFaultExitCode. Installs the
/// handler on first use; faults elsewhere go to the handler that was installed before.
void register_fault_range(const void* base, std::size_t bytes, const std::string& what);
void unregister_fault_range(const void* base);

/// Writes every page of [base, base + bytes) (a byte rewritten with its own value), so the file
/// system backs each page now. Returns false when a page faulted (SIGBUS: no space behind it);
/// the pages before it stay backed.
bool touch_pages(void* base, std::size_t bytes);

}  // namespace strata::memory
