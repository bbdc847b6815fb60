#pragma once
// --dry-run: the plan of a validated config, printed by rank 0: one line per sweep (points,
// iterations, output size, estimated time), the total with the cost model's assumptions and
// a suggested #SBATCH --time; every point only with --verbose.
#include <memory>
#include <string>
#include <vector>

#include "app/cli.hpp"
#include "config/config.hpp"
#include "sweeps/sweep.hpp"

namespace rb {

struct PlanView {
  const std::vector<std::unique_ptr<Sweep>>& sweeps;
  std::string layout;  // "ranks 64, nodes 8 (...)"
  int world_size = 1;
  Backend backend = Backend::Host;
  std::string binding;
  std::string note;                 // e.g. planned for GPUs on a machine without one
  const RunSection* run = nullptr;  // the hang guard's limits, printed with the plan
};

// Returns the exit code: 0, or 2 when --estimate-from names no readable ringbench file.
int print_plan(const PlanView& plan, const CommandLine& cli);

// "01:05:00": what to ask the batch system for, the estimate with room to spare (x 1.5 and
// 5 minutes for start-up), rounded up to whole minutes.
std::string slurm_time(double estimated_s);

}  // namespace rb
