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

// A file the run reads besides its config: which key names it (`FILE:LINE: key 'K'`) and its
// path. The output and --json may not be one of them (app/output_file.hpp).
struct InputFile {
  std::string named_by;
  std::string path;
};
// Every kernel_policy and cp_policy file the config names (read at validation, whether or not a
// sweep follows it), each once.
std::vector<InputFile> policy_files(const Config& config,
                                    const std::vector<std::unique_ptr<Sweep>>& sweeps);

}  // namespace rb
