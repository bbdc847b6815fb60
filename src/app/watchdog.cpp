#include "app/watchdog.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "runtime/gpu.hpp"

namespace rb {

Watchdog::Watchdog(int rank, WatchdogLimits limits, double poll_s)
    : rank_(rank), limits_(std::move(limits)), poll_(poll_s), run_start_(Clock::now()) {
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::point_started(const std::string& sweep, std::size_t index,
                             const std::string& label) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_point_ = true;
  sweep_ = sweep;
  index_ = index;
  label_ = label;
  point_start_ = Clock::now();
}

void Watchdog::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  in_point_ = false;
}

std::string Watchdog::message(int rank, const std::string& sweep, std::size_t index,
                              const std::string& label, double seconds, double limit,
                              const std::string& source) {
  const std::string where =
      sweep.empty() ? std::string("between points")
                    : fmt::format("sweep {} point {} ({})", sweep, index, label);
  return fmt::format("ringbench: rank {}: TIMEOUT: {} has run {:.1f} s > limit {:g} s ({}); "
                     "stopping with exit code {}\n",
                     rank, where, seconds, limit, source, kTimeoutExitCode);
}

// Called with mutex_ held.
std::string Watchdog::check(Clock::time_point now) const {
  const std::string sweep = in_point_ ? sweep_ : "";
  if (in_point_ && limits_.point_s > 0) {
    const double s = std::chrono::duration<double>(now - point_start_).count();
    if (s > limits_.point_s)
      return message(rank_, sweep, index_, label_, s, limits_.point_s, "run.point_timeout_s");
  }
  if (limits_.run_s > 0) {
    const double s = std::chrono::duration<double>(now - run_start_).count();
    // The message names the point the run was in, but the age is the run's.
    if (s > limits_.run_s)
      return message(rank_, sweep, index_, label_, s, limits_.run_s,
                     "the run, " + limits_.run_source);
  }
  return "";
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, poll_);
    if (stop_) return;
    const std::string text = check(Clock::now());
    if (!text.empty()) {
      lock.unlock();
      fire(text);
    }
  }
}

// Says why, aborts the NCCL communicators and ends the process. The abort runs on a thread of
// its own with a grace period: if it blocks too, the process still ends.
void Watchdog::fire(const std::string& text) {
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([done] {
    abort_live_nccl_comms();
    done->store(true);
  }).detach();
  for (int i = 0; i < 100 && !done->load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fflush(stdout);
  std::fflush(stderr);
  // _Exit: no destructors or atexit handlers, which could block on the hung main thread
  // (MPI_Finalize, HDF5 close would wait for the other ranks).
  std::_Exit(kTimeoutExitCode);
}

bool is_test_hang_point(const std::string& sweep, std::size_t index) {
  const char* env = std::getenv("RINGBENCH_TEST_HANG_POINT");
  if (env == nullptr) return false;
  const std::string v = env;
  const auto colon = v.rfind(':');
  if (colon == std::string::npos || v.substr(0, colon) != sweep) return false;
  const std::string number = v.substr(colon + 1);
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) return false;
  return std::stoull(number) == index;
}

}  // namespace rb
