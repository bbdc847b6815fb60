// The device engines (CUDA builds only): NCCL on device buffers, enqueued on one stream, and
// cuBLASLt GEMM / cudaMemcpy copies. Every wait on the NCCL stream polls the communicators'
// async errors (runtime/nccl_wait.hpp), so a dead peer fails the sweep instead of hanging it.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nccl.h>

#include "cuda/profiling/profiling_cuda.hpp"
#include "profiling/engine.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/nccl_wait.hpp"

namespace rb::prof {
namespace {

// Whether every rank can split: a mix would leave some ranks in ncclCommSplit and the others
// in an InitRank bootstrap, a hang (as ring/ring_comms.cpp decides for the rings).
bool split_everywhere(MPI_Comm world) {
  int mine = NcclComm::split_supported() ? 1 : 0, all = 0;
  RB_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, world));
  return all == 1;
}

// Gives the group its NCCL communicator unless an earlier sweep did (it stays in the run's
// group cache). With `split`: ncclCommSplit of the world communicator, collective over the
// world, so every rank takes part when any group lacks one (the ranks whose group has one pass
// no color); the color is the group's lowest world rank, distinct per group. Else
// ncclCommInitRank over the group's MPI communicator, collective over its members only, who
// all lack it or all have it.
void ensure_nccl(const groups::Group& g, const NcclComm& world_nccl, bool split, MPI_Comm world) {
  const bool missing = g.comms->nccl.raw() == nullptr;
  if (!split) {
    if (missing) g.comms->nccl = NcclComm(g.get());
    return;
  }
  if (!mpi::any_rank(missing, world)) return;
  const auto& members = g.comms->members;
  const int color = missing ? *std::min_element(members.begin(), members.end()) : -1;
  NcclComm made = NcclComm::split(world_nccl, color, g.rank);
  if (missing) g.comms->nccl = std::move(made);
}

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
    // The world group reuses the driver's communicator; the others keep theirs in the run's
    // group cache (profiling/groups.hpp), made by the first sweep that needs it.
    if (s.groups) {
      const bool split = split_everywhere(s.world);
      for (const auto& g : *s.groups) {
        const bool world = g.spec.kind == groups::Kind::World;
        if (!world) ensure_nccl(g, *s.nccl_world, split, s.world);
        groups_.push_back(world ? world_ : g.comms->nccl.raw());
        if (!world)
          comms_.push_back({g.comms->nccl.raw(),
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
