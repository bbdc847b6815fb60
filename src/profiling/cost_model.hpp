#pragma once
// Latency/bandwidth (alpha-beta) cost model of one collective series: t(m) = alpha + m / beta,
// fitted to measured (message size, time) points, plus the raw points for piecewise-linear
// interpolation. Pure functions; docs/cost-model.md has the formulas for the Python side.
#include <cstddef>
#include <vector>

namespace rb::cost {

struct Point {
  double bytes = 0;    // message size m as the collective sweep reports it (algbw's numerator)
  double seconds = 0;  // time of one operation
};

struct Fit {
  double alpha_s = 0;   // latency: the time of a zero-byte operation
  double beta_Bps = 0;  // asymptotic algorithm bandwidth (B/s); +inf when time does not grow with m
  double rel_rms_error = 0;            // sqrt(mean(((t_fit - t) / t)^2)) over the points used
  std::size_t points = 0;              // points used (those with bytes >= 0 and seconds > 0)
  bool ok = false;                     // false when fewer than 2 usable points
  double predict(double bytes) const;  // alpha + bytes / beta
};

// Least squares on the RELATIVE error: minimises sum(((alpha + m*g - t) / t)^2), g = 1/beta.
// Weighting every point by 1/t^2 makes each point count by its relative misfit, so the
// small-message points (where t ~ alpha) fix alpha and the large-message points (where
// t ~ m/beta) fix beta, in one solve, without choosing a split size. Constraints alpha >= 0
// and g >= 0 are enforced by refitting the other parameter alone when one comes out negative.
Fit fit_alpha_beta(std::vector<Point> points);

// Piecewise-linear interpolation in (bytes, seconds) through the points sorted by bytes;
// below the smallest point the smallest point's time, above the largest the line through the
// last two points (the bandwidth regime). Points must be non-empty.
double interpolate(std::vector<Point> points, double bytes);

}  // namespace rb::cost
