#include <cstdio>

#include "sweeps/sweep.hpp"

namespace rb {

Progress::Progress(int rank, std::string sweep, std::size_t total_points)
    : rank_(rank), sweep_(std::move(sweep)), total_(total_points),
      start_(std::chrono::steady_clock::now()) {}

void Progress::point_started(std::size_t index, const std::string& label) {
  if (rank_ != 0) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // The ETA assumes the remaining points cost what the finished ones did on average;
  // sweeps order points by size, so it is an underestimate early on and says so.
  char eta[64] = "ETA --";
  if (index > 0) {
    const double per_point = elapsed / static_cast<double>(index);
    std::snprintf(eta, sizeof eta, "ETA >= %.1f s",
                  per_point * static_cast<double>(total_ - index));
  }
  std::printf("[%s] point %zu/%zu %s (elapsed %.1f s, %s)\n", sweep_.c_str(), index + 1, total_,
              label.c_str(), elapsed, eta);
  std::fflush(stdout);
}

void Progress::note(const std::string& line) {
  if (rank_ != 0) return;
  std::printf("[%s] %s\n", sweep_.c_str(), line.c_str());
  std::fflush(stdout);
}

}  // namespace rb
