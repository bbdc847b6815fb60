// The device engines (CUDA builds only): NCCL on device buffers, enqueued on one stream, and
// cuBLASLt GEMM / cudaMemcpy copies. Every wait on the NCCL stream polls the communicators'
// async errors (runtime/nccl_wait.hpp), so a dead peer fails the sweep instead of hanging it.
#include <stdexcept>
#include <string>
#include <vector>

#include <nccl.h>

#include "cuda/profiling/profiling_cuda.hpp"
#include "profiling/engine.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/nccl_wait.hpp"

namespace rb::prof {
namespace {

class NcclEngine final : public Engine {
 public:
  explicit NcclEngine(const EngineSetup& s)
      : world_(s.nccl_world->raw()), dev_send_(s.bytes), dev_recv_(s.bytes) {
    bytes_ = s.bytes;
    send_ = dev_send_.get();
    recv_ = dev_recv_.get();
    comms_.push_back({world_, nccl_comm_name("world", s.nccl_world->size(), s.nccl_world->rank())});
    cuda::fill_zero(send_, bytes_, stream_.get());
    wait("the buffer set-up");
    // The world group reuses the driver's communicator; the others get their own, built from
    // the group's MPI communicator (all groups of a kind initialise concurrently).
    if (s.groups) {
      own_.reserve(s.groups->size());
      for (const auto& g : *s.groups) {
        const bool world = g.spec.kind == groups::Kind::World;
        own_.push_back(world ? NcclComm() : NcclComm(g.get()));
        groups_.push_back(world ? world_ : own_.back().raw());
        if (!world)
          comms_.push_back({own_.back().raw(),
                            nccl_comm_name("group '" + g.spec.label() + "' " + std::to_string(g.id),
                                           g.size, g.rank)});
      }
    }
  }
  coll::Transport transport() const override { return coll::Transport::Nccl; }

  void prepare(const coll::Call& c) override {
    const coll::Regions r = coll::regions(c, coll::Transport::Nccl);
    cuda::fill_zero(r.zero, r.zero_bytes, stream_.get());
    cuda::fill_input(r.input, r.input_count, c.dtype, c.rank, stream_.get());
    wait("the buffer fill");
  }
  std::vector<double> iteration_times(const coll::Call& c, std::size_t n,
                                      std::size_t group) override {
    cuda::EventTimeline tl(n + 1, stream_.get());
    tl.mark(0);
    for (std::size_t it = 0; it < n; ++it) {
      launch(c, it, group);
      tl.mark(it + 1);
    }
    sync();
    std::vector<double> s(n);
    for (std::size_t it = 0; it < n; ++it) s[it] = tl.seconds(it, it + 1);
    return s;
  }
  std::int64_t wrong_elements(const coll::Call& c) override {
    const coll::Regions r = coll::regions(c, coll::Transport::Nccl);
    return static_cast<std::int64_t>(
        cuda::count_mismatches(r.output, r.output_count, c.dtype, r.expect, stream_.get()));
  }

  void post(std::size_t bytes, int to, int from) override {
    auto comm = static_cast<ncclComm_t>(world_);
    auto stream = static_cast<cudaStream_t>(stream_.get());
    try {
      RB_NCCL_CHECK(ncclGroupStart());
      if (to >= 0) RB_NCCL_CHECK(ncclSend(send_, bytes, ncclChar, to, comm, stream));
      if (from >= 0) RB_NCCL_CHECK(ncclRecv(recv_, bytes, ncclChar, from, comm, stream));
      RB_NCCL_CHECK(ncclGroupEnd());
    } catch (const std::exception&) {
      enqueue_failed("a point-to-point message");
    }
  }
  // The stream runs the steps in order: no wait needed between them.
  void step(std::size_t bytes, int to, int from) override { post(bytes, to, from); }
  void sync() override { wait("the NCCL operations queued on this rank's stream"); }

 protected:
  void run(const coll::Call& c, std::size_t group) override {
    try {
      coll::collective(c.op).nccl(c, groups_.at(group), stream_.get());
    } catch (const std::exception&) {
      enqueue_failed("a collective");
    }
  }

 private:
  void* world_;
  cuda::DeviceBuffer dev_send_, dev_recv_;
  cuda::Stream stream_;
  std::vector<NcclComm> own_;       // one per group spec; empty for the world
  std::vector<void*> groups_;       // the ncclComm_t of each group spec
  std::vector<NcclCommRef> comms_;  // every communicator above, named for error messages

  void wait(const std::string& what) {
    wait_for_nccl_work(nccl_stream_wait_ops(stream_.get()), comms_, what);
  }
  // In a catch block: an enqueue on a failed communicator returns its async error; say so as
  // the wait does, else rethrow the NCCL call's own error.
  [[noreturn]] void enqueue_failed(const std::string& what) {
    throw_if_nccl_failed(comms_, "while enqueueing " + what);
    throw;
  }
};

class GpuComputeEngine final : public ComputeEngine {
 public:
  std::string gemm_engine() const override { return "cublaslt"; }
  std::string description() const override {
    return "cuBLASLt (heuristic algorithm, 32 MiB workspace)";
  }
  Timing gemm(const std::string& dtype, int n, int warmup, int iterations) override {
    Timing t;
    t.seconds = cuda::gemm_seconds(dtype, n, n, n, warmup, iterations, stream_.get());
    t.flop = 2.0 * static_cast<double>(n) * n * n;
    return t;
  }
  std::vector<double> copy(const std::string& kind, std::size_t bytes, int warmup,
                           int iterations) override {
    return cuda::copy_seconds(kind, bytes, warmup, iterations, stream_.get());
  }

 private:
  cuda::Stream stream_;
};

}  // namespace

std::unique_ptr<Engine> make_nccl_engine(const EngineSetup& setup) {
  return std::make_unique<NcclEngine>(setup);
}
std::unique_ptr<ComputeEngine> make_gpu_compute_engine() {
  return std::make_unique<GpuComputeEngine>();
}

}  // namespace rb::prof
