#pragma once
// The `contention` sweep: the same workloads run by each rank alone (the others wait without
// spinning), then by every rank at once re-bound to the whole machine, then at once under each
// binding policy, while the last `feeders` ranks load the shared CPUs, memory and PCIe like a
// data loader; a monitor thread on every rank samples the GPU (NVML), the node (/proc, /sys)
// and the process for the whole sweep. docs/sweeps/contention.md has the keys and datasets.
#include <memory>

#include "sweeps/contention/params.hpp"
#include "sweeps/sweep.hpp"

namespace rb {

const std::vector<cfg::KeySpec>& contention_keys();
std::unique_ptr<Sweep> parse_contention(const SweepSpec& spec, const ParseContext& ctx);

namespace contention {
// The parser alone (parse.cpp), for the sweep and its tests. Throws cfg::ConfigError.
Params parse_params(const SweepSpec& spec, const ParseContext& ctx);
}  // namespace contention

}  // namespace rb
