// The hang guard's pieces that can run inside one process: its message, the test hook's
// variable, and a guard that starts and stops without firing. Firing ends the process
// (exit code 124), so that is checked end to end by tests/driver/hang_guard.py.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

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
                "12.3 s > limit 10 s (run.point_timeout_s)", 0) == 0);
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
    progress.point_started(i, "p");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // each point < 0.5 s
  }
  guard.idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // idle time is no point's
  std::fclose(out);
}

TEST_CASE("watchdog: no NCCL communicator is live here, aborting none is harmless") {
  CHECK(rb::live_nccl_comm_count() == 0);
  CHECK(rb::abort_live_nccl_comms() == 0);
}
