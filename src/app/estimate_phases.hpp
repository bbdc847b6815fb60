#pragma once
// --estimate-from's phases: what an earlier file recorded of each point's phases (set-up,
// warm-up, timed, parity, calibration, write: sweeps/point_phases.hpp) and of the sweep's time
// outside its points, and a point's phases re-planned at another iteration count. Issue #30: a
// sweep's share of wall time by timed iterations alone put 24 s of a 66 s GPU sweep nowhere.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sweeps/point_phases.hpp"

namespace rb {

using PhaseSeconds = std::array<double, kPhaseCount>;

struct FilePhases {
  // Per point of the file, the phases of its slowest rank (largest wall_s), scaled so the
  // points add up to no more than the busiest rank's (the sum of its wall_s); empty when
  // the file has no phase columns for the sweep (an older file, or a sweep that records none).
  std::vector<PhaseSeconds> points;
  double outside_s = 0;  // the sweep's wall_time_s less the sum of its points' walls
  std::int64_t iterations = -1, warmup = -1;  // the file's sweep attributes (-1: none)
};

// Reads /sweeps/<name>'s phase columns from `file` (serially); `points` the file's points,
// `sweep_wall_s` its wall_time_s. Never throws: a missing column is an empty result.
FilePhases read_phases(const std::string& file, const std::string& group, std::size_t points,
                       double sweep_wall_s);

// A file point's phases for a plan line: where the line says "N iterations (+W warmup)" and the
// file its own counts, the timed phase scales by N / the file's, the warm-up by W / the file's
// (from the timed phase's per-iteration time when the file ran none); the rest as measured.
PhaseSeconds replanned(const PhaseSeconds& measured, const FilePhases& file,
                       const std::string& plan_line);

double sum(const PhaseSeconds& p);

}  // namespace rb
