#pragma once
// The run-time estimate of a plan: a simple cost model per sweep type (each sweep's
// estimated_seconds, at the assumed rates below), or the measured times of an earlier output
// file where its points match (--estimate-from). docs/user-guide.md describes both.
#include <memory>
#include <string>
#include <vector>

#include "app/estimate_phases.hpp"
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

// run.point_timeout_s: auto, the default: a point may take kAutoPointFactor times its whole
// sweep's estimate, and at least kAutoPointFloorS. The model can be off by a few times (2.3x low
// for ring sweeps on 2 H200s), never by ten on a whole sweep, so this stops a deadlock, not a
// slow point. RINGBENCH_TEST_AUTO_POINT_FLOOR_S lowers the floor for tests.
constexpr double kAutoPointFactor = 10;
constexpr double kAutoPointFloorS = 600;
double auto_point_timeout_s(double sweep_estimate_s);

// What an earlier file says a sweep took.
struct Measured {
  bool found = false;  // some or all of the sweep's points matched
  double seconds = 0;  // the matched points' measured time plus the model's for the rest
  std::size_t points = 0, matched_points = 0;
  std::string why_not;  // when not found: why the model is used instead
  // Where the file recorded its points' phases (wall_s, phase_*_s): the seconds split by
  // phase over the matched points, the sweep's time outside its points, and the model's for
  // the unmatched ones; the three sum to `seconds`.
  bool phased = false;
  PhaseSeconds phase_s{};
  double outside_s = 0, model_s = 0;
};
// Reads `file` with the h5 layer (serially, on the caller). The file's sweep must have the
// same name and type and be complete. Sweeps with point labels (ring_attention,
// kernel_tuning, contention) match point by point: a point whose label starts a plan line
// costs its recorded phases (the slowest rank's; timed and warm-up scaled to the plan line's
// iteration counts) plus, once, the sweep's time outside its points; in a file without phases,
// its share of the sweep's wall_time_s (in proportion to its timed iterations, total_time_s,
// where recorded; else an equal share). The other points cost the model's average (`model_s`
// of the sweep / its points). Sweeps without labels match whole, when the file's run had
// `world_size` ranks and as many points (their phases, where recorded, summed as they were).
std::vector<Measured> measured_times(const std::string& file,
                                     const std::vector<std::unique_ptr<Sweep>>& sweeps,
                                     int world_size, const std::vector<double>& model_s);

}  // namespace rb
