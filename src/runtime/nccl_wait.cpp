#include "runtime/nccl_wait.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "runtime/mpi_util.hpp"

#ifdef RINGBENCH_HAVE_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda_check.hpp"
#endif

namespace rb {

namespace {
constexpr int kNcclSuccess = 0;     // ncclSuccess
constexpr int kNcclInProgress = 7;  // ncclInProgress: a non-blocking call still running

void real_pause(std::chrono::microseconds us) {
  if (us.count() == 0)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(us);
}

// The test-only hook RINGBENCH_TEST_NCCL_ERROR=N: from this process's (N+1)-th look at a
// communicator on, every one reads as failed with ncclRemoteError, so a test on one GPU drives
// the real abort, message and exit path. Unset or malformed (not a number >= 0): no effect.
bool test_error_due() {
  const char* env = std::getenv("RINGBENCH_TEST_NCCL_ERROR");
  if (env == nullptr || *env == '\0') return false;
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);
  if (*end != '\0' || n < 0) return false;
  static std::atomic<long> looks{0};
  return looks.fetch_add(1) >= n;
}

NcclCommHealth real_health(void* comm) {
  if (!test_error_due()) return nccl_comm_health(comm);
  NcclCommHealth h;
  h.code = 6;  // ncclRemoteError, with NCCL's own text for it
  h.error = "remote process exited or there was a network error";
  h.last_error = "injected by the test hook RINGBENCH_TEST_NCCL_ERROR";
  return h;
}

NcclWaitOps real_ops(std::function<bool()> work_done) {
  NcclWaitOps ops;
  ops.work_done = std::move(work_done);
  ops.health = real_health;
  ops.abort = [](void* comm) { abort_nccl_comm(comm); };
  ops.pause = real_pause;
  return ops;
}

#ifdef RINGBENCH_HAVE_CUDA
// cudaErrorNotReady is "still running"; any other error is the query's own failure.
bool finished(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  attn::gpu::throw_kernel_error("CUDA", call, __FILE__, __LINE__, cudaGetErrorString(e));
}
#endif
}  // namespace

std::string nccl_comm_name(const std::string& what, int size, int rank) {
  return what + " communicator (size " + std::to_string(size) + ", rank " + std::to_string(rank) +
         " of it)";
}

#ifdef RINGBENCH_HAVE_CUDA
NcclWaitOps nccl_stream_wait_ops(void* cuda_stream) {
  const auto s = static_cast<cudaStream_t>(cuda_stream);
  return real_ops([s] { return finished(cudaStreamQuery(s), "cudaStreamQuery"); });
}
NcclWaitOps nccl_event_wait_ops(void* cuda_event) {
  const auto e = static_cast<cudaEvent_t>(cuda_event);
  return real_ops([e] { return finished(cudaEventQuery(e), "cudaEventQuery"); });
}
#else
NcclWaitOps nccl_stream_wait_ops(void*) {
  return real_ops([]() -> bool {
    throw std::logic_error("NCCL wait: this ringbench was built without CUDA and NCCL");
  });
}
NcclWaitOps nccl_event_wait_ops(void* cuda_event) {
  return nccl_stream_wait_ops(cuda_event);
}
#endif

// Some sweeps time a batch of NCCL work with the host clock around the wait (p2p_matrix), so
// waking late would change results. cudaStreamSynchronize spins a core for the whole wait (on
// an H100: CPU time = wall time); the poll does the same with a yield for the first 100 ms
// (each poll: cudaStreamQuery ~0.4 us, the async-error check ~0.04 us), which measured the same
// wake-up as the synchronize from 5 us to 10 ms of work. Past that, sleeps whose real length
// (asked + ~50 us of Linux timer slack) stays within 0.1 % of the time already waited.
std::chrono::microseconds nccl_poll_pause(std::chrono::nanoseconds waited) {
  using std::chrono::microseconds;
  using namespace std::chrono_literals;
  if (waited < 100ms) return microseconds(0);
  if (waited < 2s) return microseconds(50);
  return microseconds(1000);
}

std::string nccl_failure_message(const NcclCommRef& comm, const NcclCommHealth& health,
                                 const std::string& context) {
  std::string text = "NCCL error on the " + comm.name + " " + context + ": " + health.error +
                     " (ncclResult_t " + std::to_string(health.code) + ")";
  if (!health.last_error.empty()) text += "; NCCL says: " + health.last_error;
  return text +
         ". The wait's communicators are aborted (ncclCommAbort). A peer rank died or "
         "the network failed: look for a rank that exited or did not report, and see "
         "docs/troubleshooting.md (NCCL errors)";
}

NcclCheck check_nccl_comms(const NcclWaitOps& ops, const std::vector<NcclCommRef>& comms,
                           const std::string& context) {
  for (const NcclCommRef& c : comms) {
    const NcclCommHealth h = ops.health(c.comm);
    if (h.gone)
      return {NcclCheck::State::Gone,
              "the " + c.name +
                  " was aborted (after an earlier NCCL error, or by the hang "
                  "guard) and cannot be used " +
                  context,
              h.ending};
    if (h.code != kNcclSuccess && h.code != kNcclInProgress)
      return {NcclCheck::State::Failed, nccl_failure_message(c, h, context)};
  }
  return {};
}

// All of them: the work queued on any may wait on the failed one. The registry makes a second
// abort of one handle (by the hang guard, or a later wait) a no-op.
void abort_nccl_comms(const NcclWaitOps& ops, const std::vector<NcclCommRef>& comms) {
  for (const NcclCommRef& c : comms) ops.abort(c.comm);
}

namespace {
[[noreturn]] void fail(const NcclWaitOps& ops, const std::vector<NcclCommRef>& comms,
                       const NcclCheck& check) {
  if (check.state == NcclCheck::State::Failed) abort_nccl_comms(ops, comms);
  if (check.ending) {
    // The aborter exits with its own code within seconds (the hang guard's grace is 10 s).
    for (int s = 0; s < 60; ++s) ops.pause(std::chrono::seconds(1));
    throw std::runtime_error(check.message + "; the process was to end, but is still here");
  }
  throw std::runtime_error(check.message);
}
}  // namespace

void wait_for_nccl_work(const NcclWaitOps& ops, const std::vector<NcclCommRef>& comms,
                        const std::string& waiting_for) {
  const std::string context = "while waiting for " + waiting_for;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    try {
      if (ops.work_done()) return;
    } catch (const std::exception& e) {
      throw std::runtime_error(context + ": " + e.what());
    }
    const NcclCheck check = check_nccl_comms(ops, comms, context);
    if (check.state != NcclCheck::State::Healthy) fail(ops, comms, check);
    ops.pause(nccl_poll_pause(std::chrono::steady_clock::now() - start));
  }
}

void throw_if_nccl_failed(const std::vector<NcclCommRef>& comms, const std::string& during) {
  const NcclWaitOps ops = real_ops({});
  const NcclCheck check = check_nccl_comms(ops, comms, during);
  if (check.state != NcclCheck::State::Healthy) fail(ops, comms, check);
}

NcclErrorWatch::NcclErrorWatch(NcclWaitOps ops, std::vector<NcclCommRef> comms,
                               std::string waiting_for, std::chrono::milliseconds period,
                               std::function<void(const std::string&)> report,
                               std::function<void()> end)
    : ops_(std::move(ops)),
      comms_(std::move(comms)),
      waiting_for_(std::move(waiting_for)),
      period_(period),
      report_(std::move(report)),
      end_(std::move(end)) {
  if (!report_) {
    const int rank = mpi::world_rank_or_minus_one();
    report_ = [rank](const std::string& m) {
      print_nccl_error(rank, m);
      mark_nccl_process_ending();  // before the abort: waiting threads park, not throw
    };
  }
  if (!end_) end_ = [] { end_process_on_nccl_error(); };
  thread_ = std::thread([this] { loop(); });
}

NcclErrorWatch::~NcclErrorWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void NcclErrorWatch::loop() {
  const std::string context = "while waiting for " + waiting_for_;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, period_);
    if (stop_) return;
    const NcclCheck check = check_nccl_comms(ops_, comms_, context);
    if (check.state == NcclCheck::State::Failed) {
      lock.unlock();
      report_(check.message);
      abort_nccl_comms(ops_, comms_);
      end_();
      return;
    }
  }
}

void print_nccl_error(int world_rank, const std::string& message) {
  std::fprintf(stderr, "ringbench: rank %d: NCCL ERROR: %s; ending this rank with exit code %d\n",
               world_rank, message.c_str(), kNcclErrorExitCode);
  std::fflush(stdout);
  std::fflush(stderr);
}

void end_process_on_nccl_error() {
  // _Exit, as the hang guard: the main thread is blocked in (or about to use) the aborted
  // communicators, and MPI_Finalize or the HDF5 close would wait for the dead peer.
  std::_Exit(kNcclErrorExitCode);
}

}  // namespace rb
