// The host engines: MPI on page-aligned host buffers, and the Kokkos GEMM-like kernel.
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "host/profiling_kernels.hpp"
#include "profiling/engine.hpp"
#include "profiling/timing.hpp"
#include "runtime/mpi.hpp"

namespace rb::prof {
namespace {

class MpiEngine final : public Engine {
 public:
  explicit MpiEngine(const EngineSetup& s)
      : world_(s.world), host_send_(s.bytes), host_recv_(s.bytes) {
    bytes_ = s.bytes;
    send_ = host_send_.get();
    recv_ = host_recv_.get();
    if (s.groups)
      for (const auto& g : *s.groups) groups_.push_back(g.get());
    std::memset(send_, 1, bytes_);
  }
  coll::Transport transport() const override { return coll::Transport::Mpi; }

  void prepare(const coll::Call& c) override {
    const coll::Regions r = coll::regions(c, coll::Transport::Mpi);
    std::memset(r.zero, 0, r.zero_bytes);
    for (std::size_t i = 0; i < r.input_count; ++i)
      store(r.input, i, c.dtype, input_value(c.rank, i));
  }
  std::vector<double> iteration_times(const coll::Call& c, std::size_t n,
                                      std::size_t group) override {
    std::vector<double> s(n);
    for (std::size_t it = 0; it < n; ++it) {
      const double a = now_s();
      launch(c, it, group);
      s[it] = now_s() - a;
    }
    return s;
  }
  std::int64_t wrong_elements(const coll::Call& c) override {
    return static_cast<std::int64_t>(
        coll::count_mismatches_host(coll::regions(c, coll::Transport::Mpi), c.dtype));
  }

  void post(std::size_t bytes, int to, int from) override {
    if (bytes > static_cast<std::size_t>(INT32_MAX))
      throw std::runtime_error("MPI message of " + std::to_string(bytes) +
                               " bytes exceeds int counts");
    const int n = static_cast<int>(bytes);
    if (to >= 0) {
      reqs_.emplace_back();
      RB_MPI_CHECK(MPI_Isend(send_, n, MPI_BYTE, to, 17, world_, &reqs_.back()));
    }
    if (from >= 0) {
      reqs_.emplace_back();
      RB_MPI_CHECK(MPI_Irecv(recv_, n, MPI_BYTE, from, 17, world_, &reqs_.back()));
    }
  }
  void step(std::size_t bytes, int to, int from) override {
    post(bytes, to, from);
    sync();
  }
  void sync() override {
    if (!reqs_.empty())
      RB_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
    reqs_.clear();
  }

 protected:
  void run(const coll::Call& c, std::size_t group) override {
    coll::collective(c.op).mpi(c, groups_.at(group));
  }

 private:
  MPI_Comm world_;
  HostBuffer host_send_, host_recv_;
  std::vector<MPI_Comm> groups_;
  std::vector<MPI_Request> reqs_;
};

class HostComputeEngine final : public ComputeEngine {
 public:
  std::string gemm_engine() const override { return "kokkos"; }
  std::string description() const override {
    return "Kokkos GEMM-like kernel (default execution space)";
  }
  Timing gemm(const std::string& dtype, int n, int warmup, int iterations) override {
    const auto r = host::gemm(n, dtype == "float64", warmup, iterations);
    return {r.seconds, r.flops, r.max_abs_error};
  }
  std::vector<double> copy(const std::string& kind, std::size_t, int, int) override {
    throw std::runtime_error("copy " + kind + " needs the cuda backend");
  }
};

}  // namespace

std::unique_ptr<Engine> make_mpi_engine(const EngineSetup& setup) {
  return std::make_unique<MpiEngine>(setup);
}
std::unique_ptr<ComputeEngine> make_host_compute_engine() {
  return std::make_unique<HostComputeEngine>();
}

}  // namespace rb::prof
