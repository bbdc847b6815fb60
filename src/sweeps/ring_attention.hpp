#pragma once
// ring_attention: the ring attention algorithm (src/ring) over a grid of points
// (sequence length x ring size x layout x dtype), timed per rank and per ring step, with a
// parity check against a double-precision reference at every point.
#include <memory>

#include "sweeps/sweep.hpp"

namespace rb {

const std::vector<cfg::KeySpec>& ring_attention_keys();
std::unique_ptr<Sweep> parse_ring_attention(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb
