#pragma once
// The run-time estimate of a plan: a simple cost model per sweep type (each sweep's
// estimated_seconds, at the assumed rates below), or the measured times of an earlier output
// file where its points match (--estimate-from). docs/user-guide.md describes both.
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "sweeps/sweep.hpp"

namespace rb {

// Assumed rates of one rank for the backend: a host rank (Kokkos on CPU cores, MPI through
// shared memory) or a GPU rank (an H100-class GPU, NVLink within a node).
CostAssumptions cost_assumptions(Backend backend);
// One line naming every assumed rate, printed with every estimate.
std::string assumptions_text(const CostAssumptions& a);

// Seconds of each sweep at the assumed rates.
std::vector<double> model_estimates(const std::vector<std::unique_ptr<Sweep>>& sweeps,
                                    const CostAssumptions& a);

// What an earlier file says a sweep took.
struct Measured {
  bool found = false;          // a sweep of this name and type, complete, with the same points
  double seconds = 0;          // its wall_time_s
  std::string why_not;         // when not found: why the model is used instead
};
// Reads `file` with the h5 layer (serially, on the caller); a sweep matches when the file has
// a complete sweep of the same name and type with as many points, whose points/label keys
// start the plan's lines or, for sweeps without labels, from a run of `world_size` ranks.
std::vector<Measured> measured_times(const std::string& file,
                                     const std::vector<std::unique_ptr<Sweep>>& sweeps,
                                     int world_size);

}  // namespace rb
