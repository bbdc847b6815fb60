#pragma once
// kernel_tuning: every kernel path this build has on this run's device, timed forward and
// backward on one block (block rows x head dim x dtype x causal x dilation) and checked against
// the reference. It reuses the ring machinery at ring size 1 (the block is the whole sequence),
// each rank alone on its own device, so the numbers are what the ring's block kernels see.
#include <memory>

#include "sweeps/sweep.hpp"

namespace rb {

const std::vector<cfg::KeySpec>& kernel_tuning_keys();
std::unique_ptr<Sweep> parse_kernel_tuning(const SweepSpec& spec, const ParseContext& ctx);

}  // namespace rb
