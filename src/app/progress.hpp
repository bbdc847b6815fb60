#pragma once
// Rank-0-only progress lines with elapsed time and ETA; silent elsewhere. Every rank's sweep
// calls point_started, so it also tells this rank's hang guard (if any) which point runs, and
// holds the test-only hang hook (RINGBENCH_TEST_HANG_POINT, app/watchdog.hpp).
#include <chrono>
#include <cstdio>
#include <string>

#include "sweeps/sweep.hpp"

namespace rb {

class Watchdog;

class Progress final : public ProgressReporter {
 public:
  Progress(int rank, std::string sweep, std::size_t total_points, double min_interval_s = 2.0,
           std::FILE* out = stdout);
  // Prints the first and last point and any point at least min_interval_s after the last line.
  void point_started(std::size_t index, const std::string& label) override;
  void note(const std::string& line) override;
  // The hang guard told of each point (not owned; null: none).
  void watch(Watchdog* watchdog) { watchdog_ = watchdog; }

 private:
  void print_point(std::size_t index, const std::string& label);

  int rank_;
  std::string sweep_;
  std::size_t total_;
  std::chrono::steady_clock::time_point start_;
  double min_interval_s_;
  std::FILE* out_;
  double last_printed_ = -1e300;
  Watchdog* watchdog_ = nullptr;
};

}  // namespace rb
