#pragma once
// The `p2p_matrix` sweep: for the ordered pairs of ranks its `pairs:` set names (every pair up
// to 64 ranks, fewer beyond; profiling/pair_schedule.hpp), the latency (small-message
// ping-pong) and bandwidth (large messages), one way and both ways at once, in rounds of
// disjoint pairs measured at the same time (or one pair at a time: schedule: serial); plus the
// bandwidth matrix under concurrent load (every rank sending to rank + s for each shift s at
// once). NCCL send/recv on GPU buffers, MPI on host buffers.
// docs/sweeps/p2p_matrix.md describes the keys and the points table (one point per pair
// and per shift; a rank's row holds what it measured).
#include <memory>

#include "sweeps/sweep.hpp"

namespace rb {

const std::vector<cfg::KeySpec>& p2p_matrix_keys();
std::unique_ptr<Sweep> parse_p2p_matrix(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb
