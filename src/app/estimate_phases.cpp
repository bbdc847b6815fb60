#include "app/estimate_phases.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <regex>

#include "metrics/h5.hpp"

namespace rb {

double sum(const PhaseSeconds& p) {
  double total = 0;
  for (double x : p) total += x;
  return total;
}

namespace {

// [rows, P] of a metric, or empty when the file lacks it or its shape is another.
std::vector<double> column(const std::string& file, const std::string& dataset, std::size_t points,
                           std::size_t& rows) {
  try {
    std::vector<std::uint64_t> dims;
    std::vector<double> v = h5::read_doubles(file, dataset, &dims);
    if (dims.size() != 2 || dims[1] != points) return {};
    rows = dims[0];
    return v;
  } catch (const std::exception&) {
    return {};
  }
}

std::int64_t int_attr(const std::string& file, const std::string& group, const char* name) {
  try {
    const std::vector<std::int64_t> v = h5::read_int_attr(file, group, name);
    return v.empty() ? -1 : v[0];
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

FilePhases read_phases(const std::string& file, const std::string& group, std::size_t points,
                       double sweep_wall_s) {
  FilePhases f;
  std::size_t rows = 0;
  const std::vector<double> wall = column(file, group + "/" + kWallColumn, points, rows);
  if (wall.empty()) return f;
  std::vector<std::vector<double>> phase;
  for (const PhaseName& n : phase_names()) {
    std::size_t r = 0;
    phase.push_back(column(file, group + "/" + n.column, points, r));
    if (phase.back().empty() || r != rows) return f;
  }
  // The slowest rank's phases: the point took as long as it did, the others waited for it.
  f.points.assign(points, PhaseSeconds{});
  double walls = 0;
  for (std::size_t p = 0; p < points; ++p) {
    double worst = -1;
    for (std::size_t r = 0; r < rows; ++r) {
      const double w = wall[r * points + p];
      if (std::isnan(w) || w <= worst) continue;
      worst = w;
      for (std::size_t i = 0; i < kPhaseCount; ++i) f.points[p][i] = phase[i][r * points + p];
    }
    walls += worst > 0 ? worst : 0;
  }
  // The ranks start a point at different times, so the slowest ranks' walls overlap and add up
  // to a little more (1-4 % on the loaded 2-core host) than any rank's points took: scaled down
  // to the busiest rank's, the points and the time outside them add up to the sweep's wall time.
  double busiest = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    double mine = 0;
    for (std::size_t p = 0; p < points; ++p) {
      const double w = wall[r * points + p];
      mine += std::isnan(w) ? 0 : w;
    }
    busiest = std::max(busiest, mine);
  }
  if (walls > busiest && walls > 0)
    for (PhaseSeconds& p : f.points)
      for (double& x : p) x *= busiest / walls;
  f.outside_s = std::max(0.0, sweep_wall_s - std::min(walls, busiest));
  f.iterations = int_attr(file, group, "iterations");
  f.warmup = int_attr(file, group, "warmup");
  return f;
}

PhaseSeconds replanned(const PhaseSeconds& measured, const FilePhases& file,
                       const std::string& plan_line) {
  static const std::regex counts(R"(, (\d+) iterations \(\+(\d+) warmup\)$)");
  std::smatch m;
  if (file.iterations <= 0 || file.warmup < 0 || !std::regex_search(plan_line, m, counts))
    return measured;
  const double n = std::stod(m[1].str()), w = std::stod(m[2].str());
  const std::size_t timed = static_cast<std::size_t>(Phase::Timed);
  const std::size_t warmup = static_cast<std::size_t>(Phase::Warmup);
  const double per_iteration = measured[timed] / static_cast<double>(file.iterations);
  PhaseSeconds out = measured;
  out[timed] = per_iteration * n;
  out[warmup] =
      file.warmup > 0 ? measured[warmup] * w / static_cast<double>(file.warmup) : per_iteration * w;
  return out;
}

}  // namespace rb
