#include <cstdio>

#include "app/progress.hpp"

namespace rb {

Progress::Progress(int rank, std::string sweep, std::size_t total_points, double min_interval_s,
                   std::FILE* out)
    : rank_(rank), sweep_(std::move(sweep)), total_(total_points),
      start_(std::chrono::steady_clock::now()), min_interval_s_(min_interval_s), out_(out) {}

void Progress::point_started(std::size_t index, const std::string& label) {
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
  char eta[64] = "ETA --";
  if (index > 0) {
    const double per_point = elapsed / static_cast<double>(index);
    std::snprintf(eta, sizeof eta, "ETA >= %.1f s",
                  per_point * static_cast<double>(total_ - index));
  }
  std::fprintf(out_, "[%s] point %zu/%zu %s (elapsed %.1f s, %s)\n", sweep_.c_str(), index + 1,
               total_, label.c_str(), elapsed, eta);
  std::fflush(out_);
}

void Progress::note(const std::string& line) {
  if (rank_ != 0) return;
  std::fprintf(out_, "[%s] %s\n", sweep_.c_str(), line.c_str());
  std::fflush(out_);
}

}  // namespace rb
