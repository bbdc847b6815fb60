#include "profiling/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace rb::cost {

double Fit::predict(double bytes) const {
  if (std::isinf(beta_Bps)) return alpha_s;
  return alpha_s + bytes / beta_Bps;
}

namespace {

// Weighted sums of the normal equations of sum(w * (a + m*g - t)^2), w = 1/t^2.
struct Sums {
  double w = 0, wm = 0, wmm = 0, wt = 0, wmt = 0;
};

double rel_rms(const std::vector<Point>& pts, double alpha, double g) {
  double acc = 0;
  for (const auto& p : pts) {
    const double r = (alpha + p.bytes * g - p.seconds) / p.seconds;
    acc += r * r;
  }
  return std::sqrt(acc / static_cast<double>(pts.size()));
}

}  // namespace

Fit fit_alpha_beta(std::vector<Point> points) {
  std::vector<Point> pts;
  pts.reserve(points.size());
  for (const auto& p : points)
    if (p.bytes >= 0 && p.seconds > 0 && std::isfinite(p.seconds)) pts.push_back(p);
  Fit fit;
  fit.points = pts.size();
  if (pts.size() < 2) return fit;

  Sums s;
  for (const auto& p : pts) {
    const double w = 1.0 / (p.seconds * p.seconds);
    s.w += w;
    s.wm += w * p.bytes;
    s.wmm += w * p.bytes * p.bytes;
    s.wt += w * p.seconds;
    s.wmt += w * p.bytes * p.seconds;
  }
  double alpha = 0, g = 0;
  const double det = s.w * s.wmm - s.wm * s.wm;
  // det ~ 0: every point has the same size; only a latency can be fitted.
  if (std::fabs(det) > 1e-12 * s.w * s.wmm) {
    alpha = (s.wmm * s.wt - s.wm * s.wmt) / det;
    g = (s.w * s.wmt - s.wm * s.wt) / det;
  } else {
    g = -1;
  }
  if (alpha < 0 && s.wmm > 0) {  // pure bandwidth: t = m * g
    alpha = 0;
    g = s.wmt / s.wmm;
  }
  if (g <= 0) {  // pure latency: t = alpha
    g = 0;
    alpha = s.wt / s.w;
  }
  fit.alpha_s = alpha;
  fit.beta_Bps = g > 0 ? 1.0 / g : std::numeric_limits<double>::infinity();
  fit.rel_rms_error = rel_rms(pts, alpha, g);
  fit.ok = true;
  return fit;
}

double interpolate(std::vector<Point> points, double bytes) {
  if (points.empty()) throw std::invalid_argument("cost::interpolate: no points");
  std::sort(points.begin(), points.end(),
            [](const Point& a, const Point& b) { return a.bytes < b.bytes; });
  if (bytes <= points.front().bytes || points.size() == 1) return points.front().seconds;
  auto hi = std::lower_bound(points.begin(), points.end(), bytes,
                             [](const Point& p, double b) { return p.bytes < b; });
  if (hi == points.end()) hi = points.end() - 1;  // extrapolate with the last segment
  auto lo = hi - 1;
  const double span = hi->bytes - lo->bytes;
  if (span <= 0) return hi->seconds;
  return lo->seconds + (bytes - lo->bytes) * (hi->seconds - lo->seconds) / span;
}

}  // namespace rb::cost
