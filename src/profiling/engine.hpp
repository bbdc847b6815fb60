#pragma once
// How the profiling sweeps move data: one engine per run, over MPI on host buffers (host
// backend) or NCCL on device buffers (cuda backend). An engine owns its send and receive
// buffers, fills them, launches collectives and point-to-point messages, waits, times single
// calls and checks the received data; the sweeps never ask which transport they have.
// The one choice between the two lives in engine.cpp.
//
// And what one rank computes on its own (GEMM, memory copies): a ComputeEngine of the same
// backend.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "config/config.hpp"
#include "profiling/collective_table.hpp"
#include "profiling/groups.hpp"
#include "runtime/gpu.hpp"

namespace rb::prof {

// Where an engine sends: the world, the groups of the collectives sweep (indexed as given),
// and the driver's world NCCL communicator on the cuda backend (null on the host backend).
struct EngineSetup {
  Backend backend = Backend::Host;
  MPI_Comm world = MPI_COMM_WORLD;
  const NcclComm* nccl_world = nullptr;
  const std::vector<groups::Group>* groups = nullptr;  // none: point-to-point over the world only
  std::size_t bytes = 0;                               // per buffer (send and receive)
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual coll::Transport transport() const = 0;
  void* send() const { return send_; }
  void* recv() const { return recv_; }

  // Collectives. prepare: zero the output side and write this rank's input (pattern.hpp) at
  // the call's buffers. launch: iteration `iter` of the call on group `group`, with
  // nccl-tests' buffer shift (each iteration moves through the allocation, away from caches).
  virtual void prepare(const coll::Call& c) = 0;
  void launch(const coll::Call& c, std::size_t iter, std::size_t group);
  // Per-call seconds of `n` launches (device events on NCCL, a host clock around each
  // blocking call on MPI).
  virtual std::vector<double> iteration_times(const coll::Call& c, std::size_t n,
                                              std::size_t group) = 0;
  // Output elements of the last call that differ from the expectation (waits for it).
  virtual std::int64_t wrong_elements(const coll::Call& c) = 0;

  // Point-to-point over the world: one batch sending `bytes` to `to` and receiving them from
  // `from` (-1: none) that progresses as one (an NCCL group); not waited for.
  virtual void post(std::size_t bytes, int to, int from) = 0;
  // A batch the next one must not overlap (a ping-pong step): MPI waits, NCCL's stream orders.
  virtual void step(std::size_t bytes, int to, int from) = 0;

  // Waits for everything launched or posted so far.
  virtual void sync() = 0;

 protected:
  virtual void run(const coll::Call& c, std::size_t group) = 0;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  std::size_t bytes_ = 0;
};

// Throws std::runtime_error when the backend cannot run here (cuda without a CUDA build).
std::unique_ptr<Engine> make_engine(const EngineSetup& setup);

// Per-call seconds of a rank-local kernel and its work.
struct Timing {
  std::vector<double> seconds;
  double flop = 0;
  double max_abs_error = -1;  // of a checked result; < 0 when not checked
};

class ComputeEngine {
 public:
  virtual ~ComputeEngine() = default;
  virtual std::string gemm_engine() const = 0;  // "cublaslt", "kokkos"
  virtual std::string description() const = 0;
  // C = A * B, n x n x n, in `dtype` (float32, float64; GPU also bfloat16, float16, tf32).
  virtual Timing gemm(const std::string& dtype, int n, int warmup, int iterations) = 0;
  // Copies of `bytes` of `kind` (d2d, h2d_pinned, ...); the host backend has none (throws).
  virtual std::vector<double> copy(const std::string& kind, std::size_t bytes, int warmup,
                                   int iterations) = 0;
};

std::unique_ptr<ComputeEngine> make_compute_engine(Backend backend);

// The host engines, in every build (engine.cpp chooses).
std::unique_ptr<Engine> make_mpi_engine(const EngineSetup& setup);
std::unique_ptr<ComputeEngine> make_host_compute_engine();
// The device engines, defined only in CUDA builds (nccl_engine.cpp).
std::unique_ptr<Engine> make_nccl_engine(const EngineSetup& setup);
std::unique_ptr<ComputeEngine> make_gpu_compute_engine();

}  // namespace rb::prof
