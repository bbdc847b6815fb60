#include "app/run_end.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "app/end_record.hpp"
#include "app/file_write.hpp"
#include "app/heartbeat.hpp"
#include "app/progress.hpp"
#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"

namespace rb {

WatchdogLimits watchdog_limits(const CommandLine& cli, const Config& config) {
  WatchdogLimits limits;
  limits.run_s = config.run.timeout_s;
  limits.point_s = config.run.point_timeout_s;
  limits.point_auto = config.run.point_timeout_auto;
  if (cli.timeout_s > 0) {
    limits.run_s = cli.timeout_s;
    limits.run_source = "--timeout";
  }
  return limits;
}

std::unique_ptr<SignalWatch> watch_signals(Watchdog& watchdog, int rank) {
  try {
    return std::make_unique<SignalWatch>([&watchdog](int signo) { watchdog.interrupt(signo); });
  } catch (const std::exception& e) {
    fmt::print(stderr, "ringbench: warning: rank {}: {}\n", rank, e.what());
    return nullptr;
  }
}

std::string start_heartbeats(Watchdog& watchdog, const std::string& out_path, MPI_Comm node,
                             MPI_Comm world) {
  const std::string path = out_path + ".heartbeat";
  std::string error;
  bool created = false;
  if (mpi::rank_of(world) == 0) {
    try {  // a new empty file; one left by a stopped run is replaced, nothing else is
      write_file_replacing(path, "", false, "heartbeat file");
      created = true;
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!mpi::any_rank(!error.empty(), world))
    error = watchdog.start_heartbeat(std::make_unique<NodeHeartbeat>(path, world, node));
  if (!error.empty())
    fmt::print(stderr,
               "ringbench: warning: rank {}: the hang guard cannot name a stopped rank: "
               "{}\n",
               mpi::rank_of(world), error);
  return created ? path : "";
}

[[noreturn]] void await_guard_exit(bool fired_here) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::seconds(fired_here ? 60 : 20));
  std::_Exit(kTimeoutExitCode);
}

void stop_if_guard_fired(Watchdog* watchdog, MPI_Comm world) {
  if (watchdog != nullptr && mpi::any_rank(watchdog->fired(), world))
    await_guard_exit(watchdog->fired());
}

int agreed_stop_signal(Watchdog& watchdog, MPI_Comm world) {
  int mine = watchdog.stop_signal(), any = 0;
  RB_MPI_CHECK(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, world));
  if (any != 0) watchdog.stop_agreed();
  return any;
}

[[noreturn]] void abort_run(const h5::File& file, int rank, MPI_Comm world) {
  struct stat st {};
  const std::string& unfinished = file.pending();
  if (rank == 0 && !unfinished.empty() && ::lstat(unfinished.c_str(), &st) == 0 &&
      S_ISREG(st.st_mode) && ::unlink(unfinished.c_str()) == 0)
    fmt::print(stderr,
               "ringbench: removed this run's unfinished file '{}'; the output '{}' it was to "
               "replace (--force) is left as it was\n",
               unfinished, file.path());
  std::fflush(stderr);
  if (rank != 0 && !unfinished.empty()) std::this_thread::sleep_for(std::chrono::seconds(1));
  MPI_Abort(world, 1);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

[[noreturn]] void stop_on_output_error(const std::exception& e, const std::string& where,
                                       const h5::File& file, int rank, JsonReport* json,
                                       MPI_Comm world) {
  fmt::print(stderr, "ringbench: rank {}: writing {} to {} failed: {}; stopping the run\n", rank,
             where, file.path(), e.what());
  std::fflush(stderr);
  if (json != nullptr) write_json(*json, "failed", where + ": " + e.what());
  abort_run(file, rank, world);
}

void end_run(const RunEnd& end, h5::File& file, Watchdog& watchdog, JsonReport* json, int rank,
             MPI_Comm world) {
  stop_if_guard_fired(&watchdog, world);
  if (!watchdog.end_run()) await_guard_exit(true);  // it fired since: its end
  std::string unfinished;
  try {
    h5::Group run = file.root().group("run");
    run.attr("foreign_cpu_fraction", end.foreign_cpu);
    run.set_attr("end_time", utc_now_iso8601());
    run.set_attr("status", end.status());
    run.set_attr("failure", end.failure());
    // A --force run a signal stopped leaves the old file as it was (docs/user-guide.md): its
    // own, cut short, is not renamed over it but removed.
    unfinished = end.signal != 0 ? file.pending() : "";
    file.close(unfinished.empty());
  } catch (const std::exception& e) {
    stop_on_output_error(e, "the run's end status", file, rank, json, world);
  }
  if (!unfinished.empty() && rank == 0) {
    ::unlink(unfinished.c_str());
    fmt::print(stderr,
               "ringbench: removed this run's unfinished file '{}'; the output '{}' it was to "
               "replace (--force) is left as it was\n",
               unfinished, file.path());
  }
  if (end.guarded) watchdog.release_heartbeat();  // every rank is here (a collective)
  if (!end.heartbeat.empty() && rank == 0) ::unlink(end.heartbeat.c_str());
  // The signal's record, written when it came in case a SIGKILL followed: /run says it now.
  if (end.signal != 0 && rank == 0) ::unlink(end_record_path(end.out_path).c_str());
  if (json != nullptr) write_json(*json, end.status(), end.failure());
}

}  // namespace rb
