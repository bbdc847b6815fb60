#include "app/progress.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "app/run_end.hpp"
#include "app/watchdog.hpp"

namespace rb {

std::string utc_now(const char* strftime_format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, strftime_format, &tm);
  return buf;
}

std::string utc_now_iso8601() {
  return utc_now("%Y-%m-%dT%H:%M:%SZ");
}

std::string utc_clock() {
  return utc_now("%H:%M:%S");
}

std::string duration_text(double s) {
  if (!(s >= 0)) return "--";
  if (s < 1) return fmt::format("{:.2f} s", s);
  if (s < 10) return fmt::format("{:.1f} s", s);
  if (s < 60) return fmt::format("{:.0f} s", s);
  const auto whole = static_cast<long long>(std::llround(s));
  if (whole < 3600) return fmt::format("{} min {} s", whole / 60, whole % 60);
  return fmt::format("{} h {:02} min", whole / 3600, (whole % 3600) / 60);
}

RunProgress::RunProgress(std::vector<double> estimated_s, Screen screen, RecordsSink sink)
    : estimated_s_(std::move(estimated_s)),
      screen_(screen),
      sink_(std::move(sink)),
      start_(std::chrono::steady_clock::now()) {}

double RunProgress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double RunProgress::eta_s(std::size_t index, double fraction) const {
  if (index >= estimated_s_.size()) return -1;
  const double before = std::accumulate(estimated_s_.begin(), estimated_s_.begin() + index, 0.0);
  const double total = std::accumulate(estimated_s_.begin(), estimated_s_.end(), 0.0);
  const double done = before + fraction * estimated_s_[index];
  if (!(done > 0) || !(total > done)) return -1;
  // Measured seconds per estimated second so far: the cost model's rates are guesses, the
  // run's own pace corrects them.
  return (total - done) * elapsed_s() / done;
}

void RunProgress::records(std::size_t sweep, std::vector<h5::PointRecord> r) const {
  if (sink_) sink_(sweep, std::move(r));
}

Progress::Progress(int rank, std::string sweep, std::size_t total_points, double min_interval_s,
                   std::FILE* out)
    : rank_(rank),
      sweep_(std::move(sweep)),
      total_(total_points),
      start_(std::chrono::steady_clock::now()),
      min_interval_s_(min_interval_s),
      out_(out) {}

std::string Progress::prefix() const {
  if (run_ == nullptr) return fmt::format("{} [{}]", utc_clock(), sweep_);
  return fmt::format("{} sweep {}/{} [{}]", utc_clock(), index_ + 1, run_->sweeps(), sweep_);
}

bool Progress::point_started(std::size_t index, const std::string& label) {
  if (agree_on_ != MPI_COMM_NULL && watchdog_ != nullptr) {
    stopped_by_ = agreed_stop_signal(*watchdog_, agree_on_);
    if (stopped_by_ != 0) {
      stopped_before_ = index;
      return false;
    }
  }
  if (watchdog_ != nullptr) watchdog_->point_started(sweep_, index, label);
  print_point(index, label);
  // Test-only: a signal while the point runs, on every rank.
  if (is_test_signal_point(sweep_, index) && std::raise(SIGTERM) == 0 && watchdog_ != nullptr)
    for (int i = 0; i < 500 && watchdog_->stop_signal() == 0; ++i)  // the watch thread took it
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Test-only: the point never ends, on every rank, as a hung collective would.
  if (is_test_hang_point(sweep_, index))
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  return true;
}

void Progress::print_point(std::size_t index, const std::string& label) {
  if (silent()) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // A sweep of a thousand sub-millisecond points should not bury the header and the
  // summaries: print the first and last point and otherwise at most one line per interval,
  // which still shows every point of a slow sweep.
  const bool first_or_last = index == 0 || index + 1 == total_;
  if (!first_or_last && elapsed - last_printed_ < min_interval_s_) return;
  last_printed_ = elapsed;
  // The sweep's ETA assumes the remaining points cost what the finished ones did on average;
  // sweeps order points by size, so it is an underestimate early on and says so.
  std::string eta = "ETA --";
  if (index > 0) {
    const double per_point = elapsed / static_cast<double>(index);
    eta = fmt::format("ETA >= {:.1f} s", per_point * static_cast<double>(total_ - index));
  }
  if (run_ != nullptr) {
    const double fraction =
        total_ > 0 ? static_cast<double>(index) / static_cast<double>(total_) : 0;
    eta += "; run ETA ~" + duration_text(run_->eta_s(index_, fraction));
  }
  fmt::print(out_, "{} point {}/{} {} (elapsed {:.1f} s, {})\n", prefix(), index + 1, total_, label,
             elapsed, eta);
  std::fflush(out_);
}

void Progress::note(const std::string& line) {
  if (silent()) return;
  fmt::print(out_, "{} {}\n", prefix(), line);
  std::fflush(out_);
}

void Progress::results(const std::string& table, std::vector<h5::PointRecord> records) {
  if (rank_ != 0) return;
  if (run_ != nullptr) run_->records(index_, std::move(records));
  if (silent() || table.empty()) return;
  std::FILE* out = run_ != nullptr ? run_->screen().results : out_;
  // Progress and results may share a terminal through two streams: what came first shows first.
  std::fflush(out_);
  fmt::print(out, "\n{}", table);  // a blank line before each table (tables end with a newline)
  std::fflush(out);
}

}  // namespace rb
