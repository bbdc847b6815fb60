#pragma once
// Where a point's wall time goes, phase by phase: set-up (communicators, allocation, inputs),
// warm-up, the timed iterations, the check of the results (ring_attention's parity, collectives'
// data check), the overlap calibration and the write. Issue #30: the dry-run's cost model missed
// half of a GPU sweep (parity, set-up), so a run records each phase and `--estimate-from` takes
// each from the earlier file (src/app/estimate_phases.cpp).
// Every rank times its own; a table keeps them per rank like its other metrics.
#include <array>
#include <chrono>
#include <cstddef>
#include <string>

#include "metrics/table.hpp"

namespace rb {

enum class Phase { Setup, Warmup, Timed, Check, Calibration, Write };
inline constexpr std::size_t kPhaseCount = 6;

// The column of a phase ("phase_setup_s"), the word the dry-run prints ("setup") and what the
// column holds (its description in the file and docs/sweeps/*.md).
struct PhaseName {
  const char* column;
  const char* word;
  const char* what;
};
const std::array<PhaseName, kPhaseCount>& phase_names();
// The column of a point's whole wall time on a rank: the phases sum to it.
inline constexpr const char* kWallColumn = "wall_s";

// One point's clock: lap(p) gives the time since the previous lap (or the start) to phase p, so
// the phases cover the point's wall time without gaps; a phase that did not run stays 0.
class PhaseClock {
 public:
  PhaseClock() : start_(clock::now()), last_(start_) {}
  void lap(Phase p);
  double seconds(Phase p) const { return seconds_[static_cast<std::size_t>(p)]; }
  double wall_s() const;  // from the start to the last lap

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point start_, last_;
  std::array<double, kPhaseCount> seconds_{};
};

// Declares wall_s and one phase_*_s column per phase on a points table.
void declare_phase_columns(h5::PointsTable& t);
// This rank's phases and wall time at point `pi`.
void record_phases(h5::PointsTable& t, std::size_t pi, const PhaseClock& c);

}  // namespace rb
