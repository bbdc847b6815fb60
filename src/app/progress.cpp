#include "app/progress.hpp"

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "app/watchdog.hpp"

namespace rb {

Progress::Progress(int rank, std::string sweep, std::size_t total_points, double min_interval_s,
                   std::FILE* out)
    : rank_(rank), sweep_(std::move(sweep)), total_(total_points),
      start_(std::chrono::steady_clock::now()), min_interval_s_(min_interval_s), out_(out) {}

void Progress::point_started(std::size_t index, const std::string& label) {
  if (watchdog_ != nullptr) watchdog_->point_started(sweep_, index, label);
  print_point(index, label);
  // Test-only: the point never ends, on every rank, as a hung collective would.
  if (is_test_hang_point(sweep_, index))
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

void Progress::print_point(std::size_t index, const std::string& label) {
  if (rank_ != 0) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // A sweep of a thousand sub-millisecond points should not bury the header and the
  // summaries: print the first and last point and otherwise at most one line per interval,
  // which still shows every point of a slow sweep.
  const bool first_or_last = index == 0 || index + 1 == total_;
  if (!first_or_last && elapsed - last_printed_ < min_interval_s_) return;
  last_printed_ = elapsed;
  // The ETA assumes the remaining points cost what the finished ones did on average;
  // sweeps order points by size, so it is an underestimate early on and says so.
  std::string eta = "ETA --";
  if (index > 0) {
    const double per_point = elapsed / static_cast<double>(index);
    eta = fmt::format("ETA >= {:.1f} s", per_point * static_cast<double>(total_ - index));
  }
  fmt::print(out_, "[{}] point {}/{} {} (elapsed {:.1f} s, {})\n", sweep_, index + 1, total_, label,
             elapsed, eta);
  std::fflush(out_);
}

void Progress::note(const std::string& line) {
  if (rank_ != 0) return;
  fmt::print(out_, "[{}] {}\n", sweep_, line);
  std::fflush(out_);
}

}  // namespace rb
