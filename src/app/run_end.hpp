#pragma once
// How a run ends, every way: the hang guard's limits and the signals that go through its one
// decision, its heartbeat file, the guard's exit once it fired, a failed write of the output,
// and the normal end (the file's final status, the --json status, the summary).
#include <exception>
#include <memory>
#include <string>

#include <mpi.h>

#include "app/cli.hpp"
#include "app/interrupts.hpp"
#include "app/json_report.hpp"
#include "app/watchdog.hpp"
#include "config/config.hpp"
#include "metrics/h5.hpp"

namespace rb {

// run.timeout_s and run.point_timeout_s; --timeout overrides the run's limit.
WatchdogLimits watchdog_limits(const CommandLine& cli, const Config& config);

// SIGTERM, SIGINT and SIGUSR1 end the run through the guard's one decision (Watchdog::interrupt);
// without a watch (no pipe), they keep their default action: the process ends, nothing recorded.
std::unique_ptr<SignalWatch> watch_signals(Watchdog& watchdog, int rank);

// The hang guard's heartbeat (app/heartbeat.hpp says how it scales): rank 0 creates the
// shared file beside the output, then every rank maps its node's shared memory and starts
// beating. Without it the guard still stops the run, it only cannot name a silent rank, so a
// failure is a warning. Returns the path rank 0 created ("" elsewhere, and when it created
// none): the one file the run's end removes.
std::string start_heartbeats(Watchdog& watchdog, const std::string& out_path, MPI_Comm node,
                             MPI_Comm world);

// The hang guard decided to end the run (Watchdog::fired) while this rank's main thread went
// on (a slow point, not a hung one): the guard's exit is the run's end, so nothing more is
// written or said. A rank whose guard fired waits for it to end the process; the others wait
// for the launcher to end them when it does, at most a while, then end with its exit code.
[[noreturn]] void await_guard_exit(bool fired_here);

// Called where every rank's main thread is outside any collective (after a sweep, at the end):
// whether any rank's guard fired is agreed, so no rank writes 'complete' once one has.
void stop_if_guard_fired(Watchdog* watchdog, MPI_Comm world);

// Collective, at a point boundary (every rank outside any point): the signal that stops the run
// here, agreed on every rank (the largest number any rank's guard holds), or 0 to go on.
// A stop agreed is told to the guard (Watchdog::stop_agreed).
int agreed_stop_signal(Watchdog& watchdog, MPI_Comm world);

// Ends every rank with MPI_Abort before the run's end. Rank 0 first removes a --force run's file,
// still under its temporary name (file.pending()), and says so: the old output it was to
// replace stays as it was, and a full disk gets its room back. The other ranks give it a second
// before their abort ends every rank.
[[noreturn]] void abort_run(const h5::File& file, int rank, MPI_Comm world);

// A write or flush of the output failed: metrics/h5 agreed on it over the ranks, so every rank
// holds the same message (with the OS's reason) and stops here; the file keeps what its last good
// flush wrote (a --force run's: abort_run). MPI_Abort, not a return: the ranks may be at
// different points of a sweep.
[[noreturn]] void stop_on_output_error(const std::exception& e, const std::string& where,
                                       const h5::File& file, int rank, JsonReport* json,
                                       MPI_Comm world);

// The sweeps are over on every rank, or a signal stopped them where every rank agreed. The guard
// decides first (a run it ended writes nothing more), then /run gets its end time, status and
// failure and the file is closed; then the heartbeat file goes (and, after a signal, OUTPUT.end:
// /run says how the run ended) and --json says the status.
struct RunEnd {
  std::string out_path, heartbeat;
  std::string failures;      // "" when every sweep completed
  int signal = 0;            // the signal the ranks stopped for (0: none)
  std::string interruption;  // where ("SIGTERM during sweep S: stopped after K of N points")
  double foreign_cpu = 0;
  bool guarded = false;  // the hang guard beat (its shared memory is released collectively)
  // complete | failed | interrupted, and what /run's failure says.
  std::string status() const {
    return signal != 0 ? "interrupted" : (failures.empty() ? "complete" : "failed");
  }
  std::string failure() const {
    return signal == 0 ? failures
                       : interruption + (failures.empty() ? "" : "; failed: " + failures);
  }
  // 0 complete, 1 failed, 128 + the signal's number when one stopped the run.
  int exit_code() const {
    return signal != 0 ? interrupted_exit_code(signal) : (failures.empty() ? 0 : 1);
  }
};
void end_run(const RunEnd& end, h5::File& file, Watchdog& watchdog, JsonReport* json, int rank,
             MPI_Comm world);

}  // namespace rb
