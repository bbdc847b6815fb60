#pragma once
// Rank-0-only progress lines with elapsed time and ETA; silent elsewhere.
#include <chrono>
#include <cstdio>
#include <string>

#include "sweeps/sweep.hpp"

namespace rb {

class Progress final : public ProgressReporter {
 public:
  Progress(int rank, std::string sweep, std::size_t total_points, double min_interval_s = 2.0,
           std::FILE* out = stdout);
  // Prints the first and last point and any point at least min_interval_s after the last line.
  void point_started(std::size_t index, const std::string& label) override;
  void note(const std::string& line) override;

 private:
  int rank_;
  std::string sweep_;
  std::size_t total_;
  std::chrono::steady_clock::time_point start_;
  double min_interval_s_;
  std::FILE* out_;
  double last_printed_ = -1e300;
};

}  // namespace rb
