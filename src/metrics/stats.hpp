#pragma once
// Summary statistics of timing samples, in one place for every sweep and the driver.
// NaN samples (missing values) are ignored; an empty sample gives NaN.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace rb::stats {

inline std::vector<double> finite(const std::vector<double>& v) {
  std::vector<double> out;
  out.reserve(v.size());
  for (double x : v)
    if (!std::isnan(x)) out.push_back(x);
  return out;
}

// Linear interpolation between closest ranks (numpy's default), q in [0, 1].
inline double quantile(std::vector<double> v, double q) {
  v = finite(v);
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

inline double median(const std::vector<double>& v) {
  return quantile(v, 0.5);
}
inline double percentile(const std::vector<double>& v, double p) {
  return quantile(v, p / 100.0);
}

inline double sum(const std::vector<double>& v) {
  const auto f = finite(v);
  if (f.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (double x : f) s += x;
  return s;
}

inline double mean(const std::vector<double>& v) {
  const auto f = finite(v);
  return f.empty() ? std::numeric_limits<double>::quiet_NaN()
                   : sum(f) / static_cast<double>(f.size());
}

inline double min(const std::vector<double>& v) {
  const auto f = finite(v);
  return f.empty() ? std::numeric_limits<double>::quiet_NaN()
                   : *std::min_element(f.begin(), f.end());
}

inline double max(const std::vector<double>& v) {
  const auto f = finite(v);
  return f.empty() ? std::numeric_limits<double>::quiet_NaN()
                   : *std::max_element(f.begin(), f.end());
}

// Coefficient of variation: sample standard deviation / mean.
inline double cv(const std::vector<double>& v) {
  const auto f = finite(v);
  if (f.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  const double m = mean(f);
  double ss = 0;
  for (double x : f) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(f.size() - 1)) / m;
}

}  // namespace rb::stats
