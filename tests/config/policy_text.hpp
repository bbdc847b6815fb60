#pragma once
// Text of the host kernel policies the tests read, as `rb-analysis tune` writes them.

namespace rb::test {

// The one rule of a host policy tuned at fp32, head_dim 16, exact attention: the ranges follow.
inline constexpr const char* kHostPolicyRule =
    "- dtype: fp32\n"
    "  head_dim: 16\n"
    "  causal: false\n"
    "  segment: 0\n"
    "  rate: 0\n"
    "  ranges:\n";

}  // namespace rb::test
