#pragma once
// The hang guard (run.timeout_s, run.point_timeout_s, --timeout): one thread per rank that
// watches the run's and the current point's age. A rank stuck in a collective whose partner
// died (or hangs) never returns to the driver, so the guard cannot ask it to stop: past a
// limit it says what hung on stderr, aborts this rank's NCCL communicators (so the GPU work
// queued on them ends) and ends the process with kTimeoutExitCode. The program asks MPI only
// for MPI_THREAD_FUNNELED, so this thread may not call MPI_Abort; the launcher (mpirun, srun)
// ends the other ranks when one exits non-zero. Every sweep finished before is already
// flushed to the HDF5 file (the driver flushes after each sweep).
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

namespace rb {

constexpr int kTimeoutExitCode = 124;  // as timeout(1)

struct WatchdogLimits {
  double run_s = 0;    // 0: no limit on the whole run
  double point_s = 0;  // 0: no limit on one point
  std::string run_source = "run.timeout_s";  // or "--timeout": named in the message
  bool any() const { return run_s > 0 || point_s > 0; }
};

class Watchdog {
 public:
  // Starts the thread; the run's clock starts now.
  Watchdog(int rank, WatchdogLimits limits, double poll_s = 0.1);
  ~Watchdog();  // stops and joins the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A point's clock runs from its point_started to the next one or to idle().
  void point_started(const std::string& sweep, std::size_t index, const std::string& label);
  // Between sweeps: no point is running (the run's limit still applies).
  void idle();

  // The stderr line for a limit passed (exposed for tests).
  static std::string message(int rank, const std::string& sweep, std::size_t index,
                             const std::string& label, double seconds, double limit,
                             const std::string& source);

 private:
  using Clock = std::chrono::steady_clock;
  void loop();
  // "" while within the limits, else the message to print.
  std::string check(Clock::time_point now) const;
  [[noreturn]] void fire(const std::string& text);

  int rank_;
  WatchdogLimits limits_;
  std::chrono::duration<double> poll_;
  Clock::time_point run_start_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool in_point_ = false;
  std::string sweep_, label_;
  std::size_t index_ = 0;
  Clock::time_point point_start_;
  std::thread thread_;
};

// The test-only hang hook: RINGBENCH_TEST_HANG_POINT=SWEEP:INDEX (sweep name, 0-based point
// index) makes that point sleep forever on every rank, so tests can trigger the guard.
// Returns whether (sweep, index) is the point named; an unset or malformed variable is none.
bool is_test_hang_point(const std::string& sweep, std::size_t index);

}  // namespace rb
