// The hang guard's pieces that can run inside one process: its message, the test hook's
// variable, a guard that starts and stops without firing, and its heartbeat slots (what a
// firing guard reads to name a silent rank). Firing ends the process
// (exit code 124), so that is checked end to end by tests/driver/hang_guard.py.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <mpi.h>

#include "app/heartbeat.hpp"
#include "app/progress.hpp"
#include "app/watchdog.hpp"
#include "runtime/gpu.hpp"

namespace {
bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}
}  // namespace

TEST_CASE("watchdog: the message names rank, sweep, point, age, limit and key") {
  const std::string m =
      rb::Watchdog::message(3, "collectives", 7, "sendrecv 8 B", 12.34, 10, "run.point_timeout_s");
  CHECK(m.rfind("ringbench: rank 3: TIMEOUT: sweep collectives point 7 (sendrecv 8 B) has run "
                "12.3 s > limit 10 s (run.point_timeout_s)",
                0) == 0);
  CHECK(contains(m, "124"));
  CHECK(m.back() == '\n');
  CHECK(contains(rb::Watchdog::message(0, "", 0, "", 5, 4, "--timeout"), "between points"));
}

TEST_CASE("watchdog: RINGBENCH_TEST_HANG_POINT=SWEEP:INDEX names one point") {
  ::unsetenv("RINGBENCH_TEST_HANG_POINT");
  CHECK_FALSE(rb::is_test_hang_point("ring", 0));
  ::setenv("RINGBENCH_TEST_HANG_POINT", "ring:2", 1);
  CHECK(rb::is_test_hang_point("ring", 2));
  CHECK_FALSE(rb::is_test_hang_point("ring", 0));
  CHECK_FALSE(rb::is_test_hang_point("rin", 2));
  ::setenv("RINGBENCH_TEST_HANG_POINT", "a:b:10", 1);  // the index follows the last colon
  CHECK(rb::is_test_hang_point("a:b", 10));
  for (const char* bad : {"ring", "ring:", "ring:x", "ring:-1", ":0"}) {
    ::setenv("RINGBENCH_TEST_HANG_POINT", bad, 1);
    CAPTURE(bad);
    CHECK_FALSE(rb::is_test_hang_point("ring", 0));
  }
  ::unsetenv("RINGBENCH_TEST_HANG_POINT");
}

TEST_CASE("watchdog: points within their limit run on, and the guard stops with the run") {
  // Were a limit passed here the process would end with 124 and the test binary fail.
  rb::WatchdogLimits limits;
  limits.run_s = 30;
  limits.point_s = 0.5;
  CHECK(limits.any());
  CHECK_FALSE(rb::WatchdogLimits{}.any());
  rb::Watchdog guard(1, limits, 0.01);
  std::FILE* out = std::tmpfile();
  rb::Progress progress(1, "s", 4, 2.0, out);  // rank 1: prints nothing, still tells the guard
  progress.watch(&guard);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(progress.point_started(i, "p"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // each point < 0.5 s
  }
  guard.idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // idle time is no point's
  std::fclose(out);
}

// Issue #31 (hostile corpus, D4): a signal between claiming a new output and its first flush
// left a file with no readable HDF5 that refused the next run's claim. In a child process, since
// interrupt() ends the process it runs in.
TEST_CASE("watchdog: a signal before the first flush removes the unfinished output") {
  char dir[] = "/tmp/rb_unfinished_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/run.h5";
  for (const bool unfinished : {true, false}) {
    CAPTURE(unfinished);
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fclose(f);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      rb::Watchdog w(0, rb::WatchdogLimits{});
      w.set_unfinished_output(path);
      if (!unfinished) w.set_unfinished_output("");  // the first flush happened
      w.interrupt(SIGTERM);
      std::_Exit(99);  // not reached: interrupt ends the process
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 143);
    CHECK(::access(path.c_str(), F_OK) == (unfinished ? -1 : 0));
    ::unlink(path.c_str());
  }
  ::rmdir(dir);
}

// The child's exit status: what a Watchdog, the signal and then `then` made of the process.
template <class Then>
int child_status(int signo, Then then) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    rb::Watchdog w(0, rb::WatchdogLimits{}, 0.01);
    w.stop_at_points(true);
    w.interrupt(signo);  // only noted: the sweep stops at its next point's start
    if (w.stop_signal() != signo) std::_Exit(98);
    then(w);
    std::_Exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

TEST_CASE("watchdog: a signal while the sweeps stop at points waits for the next point") {
  CHECK(rb::interrupt_grace_s(SIGTERM) == 20.0);
  CHECK(rb::interrupt_grace_s(SIGINT) == 20.0);
  CHECK(std::isinf(rb::interrupt_grace_s(SIGUSR1)));  // the guard's limits only
  // The ranks agreed at a point's start: the main thread ends the run (end_run), exit 0 here.
  CHECK(child_status(SIGUSR1, [](rb::Watchdog& w) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          w.stop_agreed();
          if (!w.end_run()) std::_Exit(97);
        }) == 0);
  // No point boundary comes any more (a sweep that cannot stop between points): ended at once.
  CHECK(child_status(SIGTERM, [](rb::Watchdog& w) {
          w.stop_at_points(false);
          std::this_thread::sleep_for(std::chrono::seconds(5));
        }) == 143);
  // A second signal keeps the first one's name (and may only shorten the grace).
  CHECK(child_status(SIGUSR1, [](rb::Watchdog& w) {
          w.interrupt(SIGTERM);
          if (w.stop_signal() != SIGUSR1) std::_Exit(96);
          w.stop_at_points(false);
          std::this_thread::sleep_for(std::chrono::seconds(5));
        }) == 138);
}

TEST_CASE("watchdog: no NCCL communicator is live here, aborting none is harmless") {
  CHECK(rb::live_nccl_comm_count() == 0);
  CHECK(rb::abort_live_nccl_comms() == 0);
}

TEST_CASE("watchdog heartbeat: a slot is 64 bytes and reads back") {
  using W = rb::Watchdog;
  const std::string s = W::slot_text(42, "coll", 7, true, false);
  CHECK(s.size() == W::kSlotBytes);
  CHECK(s.back() == '\n');
  const W::Beat b = W::parse_slot(s);
  CHECK(b.seen);
  CHECK_FALSE(b.fired);
  CHECK(b.count == 42);
  CHECK(b.where == "sweep coll point 7");
  const std::string long_name(80, 'x');  // cut to fit the slot
  CHECK(W::slot_text(1, long_name, 123456, true, false).size() == W::kSlotBytes);
  CHECK(W::parse_slot(W::slot_text(3, "", 0, false, true)).fired);
  CHECK(W::parse_slot(W::slot_text(3, "", 0, false, false)).where == "between points");
  CHECK_FALSE(W::parse_slot(std::string(W::kSlotBytes, '\0')).seen);  // never written
}

TEST_CASE("watchdog heartbeat: the silent rank is named, firing and beating ranks are not") {
  using W = rb::Watchdog;
  auto beat = [](unsigned long long n, std::size_t point, bool fired = false) {
    return W::parse_slot(W::slot_text(n, "coll", point, true, fired));
  };
  // Rank 0 fires; rank 1 beats on at the same point; rank 2 is silent; rank 3 fired too.
  const std::vector<W::Beat> before = {beat(5, 3, true), beat(5, 3), beat(9, 2), beat(1, 3, true)};
  const std::vector<W::Beat> after = {beat(5, 3, true), beat(8, 3), beat(9, 2), beat(1, 3, true)};
  const std::string text = W::silent_ranks_text(0, before, after, 3.5);
  CAPTURE(text);
  CHECK(text.rfind("ringbench: rank 0: the rank(s) the others wait for: rank 2 (last at sweep coll "
                   "point 2) sent no heartbeat for 3.5 s",
                   0) == 0);
  CHECK(contains(text, "stopped (SIGSTOP"));
  CHECK_FALSE(contains(text, "rank 1 ("));
  CHECK_FALSE(contains(text, "rank 3"));
  // All beating: those at another point are listed; at the same point, nothing to say.
  const std::vector<W::Beat> moved = {beat(5, 3, true), beat(8, 3), beat(12, 2), beat(1, 3, true)};
  CHECK(W::silent_ranks_text(0, before, moved, 3.5) ==
        "ringbench: rank 0: ranks at another point than this one: rank 2 at sweep coll point 2\n");
  const std::vector<W::Beat> same = {beat(5, 3, true), beat(8, 3)};
  CHECK(W::silent_ranks_text(0, {beat(5, 3, true), beat(5, 3)}, same, 3.5).empty());
  // A rank that never wrote its slot is silent too.
  const std::vector<W::Beat> none = {beat(5, 3, true), W::Beat{}};
  CHECK(contains(W::silent_ranks_text(0, none, none, 3.5), "rank 1 (no heartbeat yet)"));
}

TEST_CASE("watchdog heartbeat: the beat thread writes this rank's slot") {
  char name[] = "/tmp/rb-heartbeat-XXXXXX";
  const int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  ::close(fd);
  {
    rb::WatchdogLimits limits;
    limits.run_s = 60;
    rb::Watchdog guard(0, limits, 0.01);
    guard.point_started("mem", 4, "triad");
    // A world of this process alone (MPI_COMM_SELF): it is its node's writer.
    CHECK(guard.start_heartbeat(
              std::make_unique<rb::NodeHeartbeat>(name, MPI_COMM_SELF, MPI_COMM_SELF)) == "");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    guard.release_heartbeat();
  }
  std::FILE* f = std::fopen(name, "rb");
  REQUIRE(f != nullptr);
  std::string all(rb::Watchdog::kSlotBytes, '\0');
  const std::size_t got = std::fread(all.data(), 1, all.size(), f);
  std::fclose(f);
  ::unlink(name);
  CHECK(got == all.size());
  const auto b = rb::Watchdog::parse_slot(all);
  CHECK(b.seen);
  CHECK(b.count >= 1);
  CHECK(b.where == "sweep mem point 4");
  rb::NodeHeartbeat nowhere("/nonexistent/dir/x", MPI_COMM_SELF, MPI_COMM_SELF);
  CHECK(nowhere.error() != "");
  nowhere.release();
}
