#pragma once
/// @file
/// The two memory tiers.

namespace strata::memory {

enum class Tier { Fast, Slow };

/// "fast" or "slow".
inline const char* tier_name(Tier t) { return t == Tier::Fast ? "fast" : "slow"; }

}  // namespace strata::memory
