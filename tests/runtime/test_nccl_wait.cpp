// The NCCL wait (runtime/nccl_wait.hpp) driven by fakes: no GPU and no NCCL needed. Work that
// finishes returns; an async error aborts every communicator once and throws a message that
// names the communicator, NCCL's error and the hint; a failing CUDA query keeps its message;
// the watch thread reports once. The real operations are checked where this machine allows.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/gpu.hpp"
#include "runtime/nccl_wait.hpp"
#include "test_support.hpp"

using namespace rb;
using namespace std::chrono_literals;

namespace {

// Two fake communicators (any distinct addresses do) and counters of what the loop did.
int comm_a = 0, comm_b = 0;

struct Fake {
  int done_after = -1;        // work_done() is true from this poll on; -1: never
  int error_after = -1;       // comm_b reports `error_code` from this poll on; -1: never
  int error_code = 6;         // ncclRemoteError
  int in_progress_polls = 0;  // comm_a reports ncclInProgress for this many health checks
  bool a_gone = false;
  bool ending = false;      // with a_gone: the aborter is ending the process
  std::string query_error;  // work_done() throws this when set
  std::mutex m;
  int polls = 0, health_checks = 0;
  std::map<void*, int> aborts;
  std::vector<std::chrono::microseconds> pauses;

  NcclWaitOps ops() {
    NcclWaitOps o;
    o.work_done = [this] {
      std::lock_guard<std::mutex> lock(m);
      if (!query_error.empty()) throw std::runtime_error(query_error);
      const int p = polls++;
      return done_after >= 0 && p >= done_after;
    };
    o.health = [this](void* c) {
      std::lock_guard<std::mutex> lock(m);
      ++health_checks;
      NcclCommHealth h;
      if (c == &comm_a && a_gone) {
        h.gone = true;
        h.ending = ending;
      }
      if (c == &comm_a && health_checks <= in_progress_polls) h.code = 7;
      if (c == &comm_b && error_after >= 0 && polls > error_after) {
        h.code = error_code;
        h.error = "remote process exited or there was a network error";
        h.last_error = "NET/IB : Got completion from peer 10.0.0.2 with status=12";
      }
      return h;
    };
    o.abort = [this](void* c) {
      std::lock_guard<std::mutex> lock(m);
      ++aborts[c];
    };
    o.pause = [this](std::chrono::microseconds us) {
      std::lock_guard<std::mutex> lock(m);
      pauses.push_back(us);
    };
    return o;
  }
};

std::vector<NcclCommRef> two_comms() {
  return {{&comm_a, nccl_comm_name("world", 4, 1)},
          {&comm_b, nccl_comm_name("group 'intra_node' 0", 2, 1)}};
}

}  // namespace

TEST_CASE("work that finishes ends the wait without aborting anything") {
  Fake f;
  f.done_after = 5;
  f.in_progress_polls = 2;  // ncclInProgress is not an error
  wait_for_nccl_work(f.ops(), two_comms(), "the test's work");
  CHECK(f.polls == 6);
  CHECK(f.pauses.size() == 5);  // one pause between polls, none after the last
  CHECK(f.health_checks == 10);
  CHECK(f.aborts.empty());
}

TEST_CASE("work already done returns at the first poll, before any NCCL call") {
  Fake f;
  f.done_after = 0;
  wait_for_nccl_work(f.ops(), two_comms(), "the test's work");
  CHECK(f.polls == 1);
  CHECK(f.health_checks == 0);
}

TEST_CASE("an async error after N polls aborts every communicator once and says why") {
  Fake f;
  f.error_after = 3;
  const std::string msg =
      test::error_of([&] { wait_for_nccl_work(f.ops(), two_comms(), "the ring exchange"); });
  CHECK(f.polls == 4);
  REQUIRE(f.aborts.size() == 2);
  CHECK(f.aborts[&comm_a] == 1);
  CHECK(f.aborts[&comm_b] == 1);
  CHECK(msg.find("NCCL error on the group 'intra_node' 0 communicator (size 2, rank 1 of it)") !=
        std::string::npos);
  CHECK(msg.find("while waiting for the ring exchange") != std::string::npos);
  CHECK(msg.find("remote process exited or there was a network error (ncclResult_t 6)") !=
        std::string::npos);
  CHECK(msg.find("NCCL says: NET/IB : Got completion from peer") != std::string::npos);
  CHECK(msg.find("A peer rank died or the network failed") != std::string::npos);
  CHECK(msg.find("docs/troubleshooting.md") != std::string::npos);
}

TEST_CASE("a failing CUDA query ends the wait with its own message") {
  Fake f;
  f.query_error = "CUDA call failed: cudaStreamQuery at x.cpp:1: an illegal memory access";
  const std::string msg =
      test::error_of([&] { wait_for_nccl_work(f.ops(), two_comms(), "the buffer fill"); });
  CHECK(msg == "while waiting for the buffer fill: " + f.query_error);
  CHECK(f.aborts.empty());
}

TEST_CASE("a communicator aborted elsewhere (hang guard, earlier error) is not used again") {
  Fake f;
  f.a_gone = true;
  const std::string msg =
      test::error_of([&] { wait_for_nccl_work(f.ops(), two_comms(), "the NCCL operations"); });
  CHECK(msg.find("the world communicator (size 4, rank 1 of it) was aborted") != std::string::npos);
  CHECK(f.aborts.empty());
  CHECK(f.health_checks == 1);  // stops at the gone one, never asks comm_b
}

TEST_CASE("a communicator aborted by a process that is ending: the wait parks, not races it") {
  Fake f;
  f.a_gone = true;
  f.ending = true;
  const std::string msg =
      test::error_of([&] { wait_for_nccl_work(f.ops(), two_comms(), "the NCCL operations"); });
  REQUIRE(f.pauses.size() == 60);  // a minute of 1 s pauses (the fake returns at once)
  for (const auto p : f.pauses) CHECK(p == std::chrono::seconds(1));
  CHECK(msg.find("was aborted") != std::string::npos);
  CHECK(msg.find("the process was to end, but is still here") != std::string::npos);
  CHECK(f.aborts.empty());
}

TEST_CASE("the poll pause spins (yields) first, then sleeps that wake within 0.1 % of the wait") {
  CHECK(nccl_poll_pause(0ns).count() == 0);
  CHECK(nccl_poll_pause(99ms).count() == 0);  // host-timed batches: wake as fast as a sync
  CHECK(nccl_poll_pause(100ms).count() > 0);  // a long wait (a hang?) stops burning a core
  std::vector<std::chrono::nanoseconds> waits{100ms, 1s, 2s, 10s};  // the tiers' edges too
  for (auto w = std::chrono::nanoseconds(100ms); w < 1000s; w = w * 3 / 2) waits.push_back(w);
  std::sort(waits.begin(), waits.end());
  std::chrono::microseconds last(0);
  for (const auto w : waits) {
    const auto p = nccl_poll_pause(w);
    CHECK(p >= last);  // never shrinks as the wait grows
    CHECK(p <= 1ms);   // a long wait is noticed within about a millisecond of its end
    // The real sleep is longer by Linux's timer slack (~50 us).
    CHECK(std::chrono::nanoseconds(p + 50us) * 1000 <= w);
    last = p;
  }
}

TEST_CASE("the watch reports a failure once, then aborts, then ends the rank") {
  Fake f;
  f.error_after = 0;
  f.polls = 1;  // the fake's error shows once a poll has happened
  std::atomic<int> reports{0}, ends{0};
  std::string report;
  std::size_t aborts_at_report = 99;
  {
    NcclErrorWatch watch(
        f.ops(), two_comms(), "the ring exchange", 1ms,
        [&](const std::string& s) {
          std::lock_guard<std::mutex> lock(f.m);
          report = s;
          aborts_at_report = f.aborts.size();
          ++reports;
        },
        [&] { ++ends; });
    for (int i = 0; i < 2000 && ends.load() == 0; ++i) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);  // time for a second report, which must not come
  }
  CHECK(reports.load() == 1);
  CHECK(ends.load() == 1);
  CHECK(aborts_at_report == 0);  // the message is out before an abort that might block
  CHECK(report.find("NCCL error on the group 'intra_node' 0 communicator") != std::string::npos);
  CHECK(report.find("while waiting for the ring exchange") != std::string::npos);
  CHECK(f.aborts[&comm_a] == 1);
  CHECK(f.aborts[&comm_b] == 1);
}

TEST_CASE("the watch stays silent on healthy or elsewhere-aborted communicators") {
  for (const bool gone : {false, true}) {
    Fake f;
    f.a_gone = gone;
    std::atomic<int> reports{0}, ends{0};
    {
      NcclErrorWatch watch(
          f.ops(), two_comms(), "the ring exchange", 1ms, [&](const std::string&) { ++reports; },
          [&] { ++ends; });
      std::this_thread::sleep_for(30ms);
    }
    CHECK(f.health_checks > 0);
    CHECK(reports.load() == 0);
    CHECK(ends.load() == 0);
    CHECK(f.aborts.empty());
  }
}

TEST_CASE("an enqueue error on healthy communicators is left to the caller to rethrow") {
  // No communicator here is live in the registry: each reads as aborted elsewhere.
  int not_a_comm = 0;
  CHECK_NOTHROW(throw_if_nccl_failed({}, "while enqueueing"));
  const std::string msg = test::error_of([&] {
    throw_if_nccl_failed({{&not_a_comm, nccl_comm_name("ring", 2, 0)}}, "while enqueueing");
  });
  CHECK(msg.find("the ring communicator (size 2, rank 0 of it) was aborted") != std::string::npos);
  CHECK(msg.find("cannot be used while enqueueing") != std::string::npos);
}

TEST_CASE("the registry: an unknown communicator is gone and is never aborted") {
  int not_a_comm = 0;
  CHECK(nccl_comm_health(&not_a_comm).gone);
  CHECK_FALSE(abort_nccl_comm(&not_a_comm));
  CHECK_FALSE(abort_nccl_comm(nullptr));
}

TEST_CASE("the real stream query: idle default stream, no GPU, or no CUDA") {
  const std::string msg =
      test::error_of([] { wait_for_nccl_work(nccl_stream_wait_ops(nullptr), {}, "nothing"); });
  if (!built_with_cuda())
    CHECK(msg.find("built without CUDA and NCCL") != std::string::npos);
  else if (visible_gpu_count() == 0)
    CHECK(msg.find("cudaStreamQuery") != std::string::npos);
  else
    CHECK(msg.empty());  // nothing queued on the default stream: done at once
}

TEST_CASE("the test hook RINGBENCH_TEST_NCCL_ERROR makes the real check see ncclRemoteError") {
  int not_a_comm = 0;
  const std::vector<NcclCommRef> ring{{&not_a_comm, nccl_comm_name("ring", 2, 0)}};
  auto enqueue_error = [&] {
    return test::error_of([&] { throw_if_nccl_failed(ring, "while enqueueing"); });
  };
  setenv("RINGBENCH_TEST_NCCL_ERROR", "not a number", 1);
  CHECK(enqueue_error().find("was aborted") != std::string::npos);  // malformed: no effect
  setenv("RINGBENCH_TEST_NCCL_ERROR", "0", 1);
  const std::string msg = enqueue_error();
  unsetenv("RINGBENCH_TEST_NCCL_ERROR");
  CHECK(msg.find("NCCL error on the ring communicator (size 2, rank 0 of it) while enqueueing: "
                 "remote process exited or there was a network error (ncclResult_t 6)") !=
        std::string::npos);
  CHECK(msg.find("injected by the test hook RINGBENCH_TEST_NCCL_ERROR") != std::string::npos);
  CHECK(enqueue_error().find("was aborted") != std::string::npos);  // unset again: no effect
}

// Last in the file: abort_live_nccl_comms marks the process as ending, which makes later real
// checks of aborted communicators park (the hang guard exits right after it in a real run).
TEST_CASE("a real communicator (GPU only): healthy, aborted once through the registry, then gone") {
  if (visible_gpu_count() == 0) {
    MESSAGE("no GPU: the real communicator part is skipped");
    return;
  }
  select_gpu(0);
  NcclComm comm(MPI_COMM_SELF);
  const NcclCommHealth healthy = nccl_comm_health(comm.raw());
  CHECK_FALSE(healthy.gone);
  CHECK(healthy.code == 0);
  const int live = live_nccl_comm_count();
  CHECK(abort_nccl_comm(comm.raw()));
  CHECK_FALSE(abort_nccl_comm(comm.raw()));  // never twice
  CHECK(live_nccl_comm_count() == live - 1);
  CHECK(nccl_comm_health(comm.raw()).gone);
  CHECK_FALSE(nccl_comm_health(comm.raw()).ending);
  CHECK(abort_live_nccl_comms() == live - 1);  // the hang guard skips the aborted one
  CHECK(nccl_comm_health(comm.raw()).ending);  // and says the process is ending
  // comm's destructor must now skip ncclCommDestroy on the freed handle (a crash otherwise).
}
