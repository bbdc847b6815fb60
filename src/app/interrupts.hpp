#pragma once
// The signals that end a run early: SIGTERM (Slurm's time limit and scancel, then SIGKILL after
// KillWait; mpirun passing its own SIGTERM or Ctrl-C on, then SIGKILL about a second later),
// SIGINT (Ctrl-C on a rank run without a launcher) and SIGUSR1 (Slurm's --signal warning, which
// mpirun forwards). A signal handler may do almost nothing, so it only writes the signal's
// number to a pipe; a thread of its own reads it and calls the handler the driver gave
// (Watchdog::interrupt: the run's end state, then the exit), outside the signal's context.
#include <functional>
#include <string>
#include <thread>

namespace rb {

// The exit code of a run ended by signal `signo`: 128 + signo, as a shell reports a process
// the signal killed (SIGTERM 143, SIGINT 130, SIGUSR1 138).
constexpr int interrupted_exit_code(int signo) {
  return 128 + signo;
}

// "SIGTERM", "SIGINT", "SIGUSR1"; "signal N" for any other.
std::string signal_name(int signo);

class SignalWatch {
 public:
  // Catches SIGTERM, SIGINT and SIGUSR1 from now on; `on_signal` runs on the watch thread, once
  // per signal received, and may end the process. Throws std::runtime_error when the pipe or
  // a handler cannot be set up.
  explicit SignalWatch(std::function<void(int signo)> on_signal);
  ~SignalWatch();  // the signals' earlier dispositions back, then the thread joined
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

 private:
  void loop();
  std::function<void(int)> on_signal_;
  int read_fd_ = -1;
  std::thread thread_;
};

}  // namespace rb
