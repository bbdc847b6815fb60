#pragma once
// Whether the tuned policies the sweeps would follow apply on this machine (src/app/policies.cpp).
#include <memory>
#include <vector>

#include <mpi.h>

#include "config/config.hpp"
#include "runtime/gpu.hpp"
#include "sweeps/sweep.hpp"

namespace rb {

// Decides, on every rank alike, what each kernel_policy and cp_policy key's `auto` follows: the
// file where it was tuned on this kind of machine (said once on stdout unless `quiet`), else the
// built-in rule with a warning, or (strict) an error on stderr. Returns false after an error.
// Collective over `world`.
bool decide_policies(const std::vector<std::unique_ptr<Sweep>>& sweeps, Backend backend,
                     const GpuInfo& gpu, bool quiet, MPI_Comm world);

}  // namespace rb
