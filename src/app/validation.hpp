#pragma once
// The run's first step: rank 0 reads the config, every rank parses and validates it (the same
// verdict everywhere), and --dry-run / --world-size print the plan of what was validated.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

#include "app/cli.hpp"
#include "config/config.hpp"
#include "runtime/mpi.hpp"
#include "sweeps/sweep.hpp"

namespace rb {

struct Validated {
  Config config;
  Backend backend = Backend::Host;
  std::vector<std::unique_ptr<Sweep>> sweeps;
  std::string plan_note;  // said with a --dry-run plan (e.g. planned for GPUs on a login node)
};

// Rank 0 reads the file; every rank gets the same text (or nothing, after rank 0 said why).
std::optional<std::string> read_config(const std::string& path, MPI_Comm world);

// Parses and validates everything a run needs on every rank; nullopt on every rank after the
// first rank with an error said why. `planned`: the layout is another machine's (--world-size).
std::optional<Validated> validate_everywhere(const std::string& text, const CommandLine& cli,
                                             const RankLayout& layout, int min_gpus, MPI_Comm world,
                                             bool planned = false);

// "ranks 4, nodes 1 (simulated: 2 ranks per node, block placement)".
std::string layout_text(const RankLayout& layout);

// Rank 0's --dry-run plan; `where` defaults to layout_text(layout). Returns the exit code.
int print_validated_plan(const Validated& v, const CommandLine& cli, const RankLayout& layout,
                         std::string where = "");

// Rank 0's plan for --world-size without a launcher: no collective beyond this process.
int plan_without_launcher(const CommandLine& cli, const std::string& text, MPI_Comm world);

}  // namespace rb
