#pragma once
// host_pingpong: MPI ping-pong between each rank and its next ring neighbour on host
// buffers, one pair at a time, so the whole path (config -> run -> HDF5) is exercised on any
// machine and the ring's host links get a latency/bandwidth figure.
#include <memory>

#include "sweeps/sweep.hpp"

namespace rb {

const std::vector<cfg::KeySpec>& host_pingpong_keys();
std::unique_ptr<Sweep> parse_host_pingpong(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb
