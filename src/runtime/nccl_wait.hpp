#pragma once
// Waiting for GPU work that NCCL takes part in, without hanging on a dead peer. A peer that
// died or a failed network leaves NCCL's kernels spinning, so cudaStreamSynchronize never
// returns; NCCL reports such failures only through ncclCommGetAsyncError. Two tools:
//  - wait_for_nccl_work: the one wait every NCCL wait site uses. It polls the stream or event
//    and, between polls, the communicators' async state; on an error it aborts them (through
//    the registry in gpu.hpp, so nothing is aborted twice) and throws std::runtime_error
//    naming the communicator, NCCL's error and the likely cause. The driver turns that into
//    "sweep failed" and MPI_Abort (exit code 1).
//  - NcclErrorWatch: a thread for waits ringbench does not own (the ring's attention backend
//    synchronises its compute stream in kernels/, which waits on the NCCL stream). On an error
//    it prints the same message, aborts and ends the process with kNcclErrorExitCode, as the
//    hang guard (app/watchdog.hpp) does: the main thread is blocked where it cannot throw.
// The CUDA and NCCL calls sit behind NcclWaitOps, so tests drive the logic with fakes. NCCL
// sees a dead peer only on network transports; within a node the hang guard is the backstop
// (docs/troubleshooting.md, NCCL errors).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/gpu.hpp"

namespace rb {

// The exit code of a process ended by NcclErrorWatch (next to the hang guard's 124).
constexpr int kNcclErrorExitCode = 125;

// One communicator a wait involves, and how messages name it, e.g.
// "ring communicator (size 4, rank 1 of it)".
struct NcclCommRef {
  void* comm = nullptr;  // ncclComm_t
  std::string name;
};
std::string nccl_comm_name(const std::string& what, int size, int rank);

struct NcclWaitOps {
  // true once the awaited work is done, false while it runs; throws when the query fails.
  std::function<bool()> work_done;
  std::function<NcclCommHealth(void* comm)> health;  // real: nccl_comm_health
  std::function<void(void* comm)> abort;             // real: abort_nccl_comm
  // Between polls: zero means yield. Real: std::this_thread::yield / sleep_for.
  std::function<void(std::chrono::microseconds)> pause;
};

// The real operations: work_done queries a cudaStream_t or a cudaEvent_t (as void*). Without
// CUDA, work_done throws std::logic_error (no NCCL work can exist in such a build). Test hook:
// RINGBENCH_TEST_NCCL_ERROR=N makes every communicator read as failed (ncclRemoteError) from
// the process's (N+1)-th look at one on (docs/troubleshooting.md).
NcclWaitOps nccl_stream_wait_ops(void* cuda_stream);
NcclWaitOps nccl_event_wait_ops(void* cuda_event);

// The pause before the next poll after `waited`: zero (a yield) for the first 100 ms, as
// cudaStreamSynchronize spins, then sleeps that wake within 0.1 % of the time waited.
std::chrono::microseconds nccl_poll_pause(std::chrono::nanoseconds waited);

// Polls ops.work_done until true. `waiting_for` says what the caller waits for ("the ring
// exchange"); it goes into the message. Throws std::runtime_error on a failed communicator
// (after aborting every communicator in `comms`) or one no longer live. When the hang guard or
// a watch aborted it and is ending the process with its own exit code (124, 125), the wait
// parks (ops.pause, up to 60 s) instead of racing that exit with an error of its own.
void wait_for_nccl_work(const NcclWaitOps& ops, const std::vector<NcclCommRef>& comms,
                        const std::string& waiting_for);

// For a catch block around NCCL calls that enqueue work (an enqueue on a failed communicator
// returns its async error): throws the same message as the wait, after aborting `comms`, when
// one of them failed or is no longer live; returns (the caller rethrows) when all are healthy.
void throw_if_nccl_failed(const std::vector<NcclCommRef>& comms, const std::string& during);

// One look at the communicators (no abort): the first failed or no longer live one, with the
// message for it. `context` completes "NCCL error on the X communicator <context>".
struct NcclCheck {
  enum class State { Healthy, Failed, Gone } state = State::Healthy;
  std::string message;
  bool ending = false;  // Gone, and the process is ending (NcclCommHealth::ending)
};
NcclCheck check_nccl_comms(const NcclWaitOps& ops, const std::vector<NcclCommRef>& comms,
                           const std::string& context);
void abort_nccl_comms(const NcclWaitOps& ops, const std::vector<NcclCommRef>& comms);

// The failure message (exposed for tests and the docs).
std::string nccl_failure_message(const NcclCommRef& comm, const NcclCommHealth& health,
                                 const std::string& context);

class NcclErrorWatch {
 public:
  // Every `period`, looks at the communicators; on the first failure: report(message), abort
  // them, end(). Empty report/end are the real ones: print the message with this process's
  // world rank (read here, on the constructing thread) and _Exit(kNcclErrorExitCode). The
  // message is out before the abort, which could itself block on a broken network (then the
  // hang guard's limit still ends the rank). A communicator no longer live was aborted by
  // whoever reports it: the watch stays silent.
  NcclErrorWatch(NcclWaitOps ops, std::vector<NcclCommRef> comms, std::string waiting_for,
                 std::chrono::milliseconds period = std::chrono::milliseconds(100),
                 std::function<void(const std::string&)> report = {},
                 std::function<void()> end = {});
  ~NcclErrorWatch();  // stops and joins the thread
  NcclErrorWatch(const NcclErrorWatch&) = delete;
  NcclErrorWatch& operator=(const NcclErrorWatch&) = delete;

 private:
  void loop();

  NcclWaitOps ops_;
  std::vector<NcclCommRef> comms_;
  std::string waiting_for_;
  std::chrono::milliseconds period_;
  std::function<void(const std::string&)> report_;
  std::function<void()> end_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// The watch's real report and end: "ringbench: rank R: NCCL ERROR: MESSAGE; ending this rank
// with exit code 125" on stderr (and mark_nccl_process_ending), then _Exit(kNcclErrorExitCode).
void print_nccl_error(int world_rank, const std::string& message);
[[noreturn]] void end_process_on_nccl_error();

}  // namespace rb
