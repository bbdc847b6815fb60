#pragma once
// Rank-0-only progress lines with a UTC timestamp, elapsed time and ETA, on stderr; silent
// elsewhere and with --quiet. The results tables go to the Screen's results stream. Every rank's
// sweep calls point_started, so it also tells this rank's hang guard (if any) which point runs, and
// holds the test-only hang and signal hooks (RINGBENCH_TEST_HANG_POINT,
// RINGBENCH_TEST_SIGNAL_POINT, app/watchdog.hpp). A signal stops a sweep at a point's start, where
// the ranks agree on it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <mpi.h>

#include "sweeps/sweep.hpp"

namespace rb {

class Watchdog;

// Where the run prints (docs/user-guide.md, "What goes where"): progress lines, notes and
// warnings on `progress` (stderr), so stdout holds what a log keeps: the header, the results
// tables and the summary, on `results` (stdout; stderr with --json -, whose JSON owns stdout).
// Tables fit `table_width` columns (0: --wide, one line a row).
struct Screen {
  bool quiet = false;
  std::size_t table_width = h5::kTerminalWidth;
  std::FILE* progress = stderr;
  std::FILE* results = stdout;
};

// The whole run as the progress lines see it: sweep k of N, the run's clock, each sweep's
// estimated seconds (the cost model's; they weight the run's ETA), the Screen, and where the
// sweeps' results go besides the terminal (--json, the summary).
class RunProgress {
 public:
  using RecordsSink = std::function<void(std::size_t sweep, std::vector<h5::PointRecord>)>;
  RunProgress(std::vector<double> estimated_s, Screen screen, RecordsSink sink = {});
  std::size_t sweeps() const { return estimated_s_.size(); }
  bool quiet() const { return screen_.quiet; }
  const Screen& screen() const { return screen_; }
  double elapsed_s() const;
  // Seconds left in the run when sweep `index` is `fraction` done: the estimates still to go,
  // scaled by how the time so far compares with the estimates of the work done; < 0: unknown.
  double eta_s(std::size_t index, double fraction) const;
  void records(std::size_t sweep, std::vector<h5::PointRecord> r) const;

 private:
  std::vector<double> estimated_s_;
  Screen screen_;
  RecordsSink sink_;
  std::chrono::steady_clock::time_point start_;
};

// The UTC time now in a strftime format (at most 31 characters).
std::string utc_now(const char* strftime_format);
// "2025-01-31T02:13:07Z": the run's start and end times.
std::string utc_now_iso8601();
// "02:13:07": the UTC time of day that starts every progress line.
std::string utc_clock();
// "45 s", "12 min 3 s", "2 h 05 min".
std::string duration_text(double seconds);

class Progress final : public ProgressReporter {
 public:
  // `out`: the progress lines (and, outside a run, the results tables).
  Progress(int rank, std::string sweep, std::size_t total_points, double min_interval_s = 2.0,
           std::FILE* out = stderr);
  // Prints the first and last point and any point at least min_interval_s after the last line.
  // With stop_on_signal, first agrees with every rank whether a signal stops the run here.
  bool point_started(std::size_t index, const std::string& label) override;
  void kept_points(std::size_t points) override {
    stopped_before_ = std::min(stopped_before_, points);
  }
  void note(const std::string& line) override;
  void results(const std::string& table, std::vector<h5::PointRecord> records) override;
  std::size_t table_width() const override {
    return run_ != nullptr ? run_->screen().table_width : h5::kTerminalWidth;
  }
  // The hang guard told of each point (not owned; null: none).
  void watch(Watchdog* watchdog) { watchdog_ = watchdog; }
  // Each point's start is a boundary where the ranks of `world` agree whether a signal the guard
  // holds (Watchdog::stop_signal) stops the run: collective, so only for a sweep whose every
  // rank starts every point (Sweep::stops_between_points).
  void stop_on_signal(MPI_Comm world) { agree_on_ = world; }
  // The signal the ranks agreed to stop for (0: none) and the point they stopped before.
  int stopped_by() const { return stopped_by_; }
  std::size_t stopped_before() const { return stopped_before_; }
  std::size_t total_points() const { return total_; }
  // This sweep is number `index` of `run` (not owned; null: a lone sweep, no run-level line).
  void in_run(const RunProgress* run, std::size_t index) {
    run_ = run;
    index_ = index;
  }

 private:
  void print_point(std::size_t index, const std::string& label);
  bool silent() const { return rank_ != 0 || (run_ != nullptr && run_->quiet()); }
  std::string prefix() const;  // "02:13:07 sweep 3/7 [name]"

  int rank_;
  std::string sweep_;
  std::size_t total_;
  std::chrono::steady_clock::time_point start_;
  double min_interval_s_;
  std::FILE* out_;
  double last_printed_ = -1e300;
  Watchdog* watchdog_ = nullptr;
  MPI_Comm agree_on_ = MPI_COMM_NULL;
  int stopped_by_ = 0;
  std::size_t stopped_before_ = 0;
  const RunProgress* run_ = nullptr;
  std::size_t index_ = 0;
};

}  // namespace rb
