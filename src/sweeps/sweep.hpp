#pragma once
// The common driver's contract with each sweep. A sweep is one file pair
// (src/sweeps/<type>.hpp/.cpp) plus one row in the table in src/app/registry.cpp:
//   keys:   its key table (name, type, default, constraint, description), the parser's source;
//   parse:  validate the sweep's YAML map into typed parameters (throws cfg::ConfigError),
//           knowing the world size, so impossible points are rejected before any collective work;
//   plan:   one line per point, for --dry-run and progress;
//   run:    collective over ctx.world; writes its datasets under `out` (= /sweeps/<name>).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

#include "config/config.hpp"
#include "config/key_spec.hpp"
#include "metrics/h5.hpp"
#include "metrics/table.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi.hpp"
#include "backend.hpp"
#include "kernel_paths.hpp"
#include "ring/group_transport.hpp"
#include "ring/transport_choice.hpp"
#include "ring/transport.hpp"
#include "sweeps/cp_policy.hpp"

namespace rb {

namespace groups {
class GroupCache;  // profiling/groups.hpp
}

struct ParseContext {
  int world_size = 1;
  int node_count = 1;
  Backend backend = Backend::Host;  // resolved: Host or Cuda
  // The top-level `kernel_policy` (null: none); sweeps without their own follow it.
  std::shared_ptr<KernelPolicyUse> kernel_policy;
};

// Progress of the running sweep, given by the driver (src/app/progress.hpp prints it on rank 0
// with elapsed time and ETA). A sweep reports its points in plan() order.
class ProgressReporter {
 public:
  virtual ~ProgressReporter() = default;
  // False when the run stops here instead (a signal, agreed on every rank): the sweep runs no
  // more points and writes the ones before `index` (PointsTable::keep_points), as if it had
  // planned no more. Every rank calls it at every point, unless stops_between_points() is false.
  [[nodiscard]] virtual bool point_started(std::size_t index, const std::string& label) = 0;
  // After a stop: the sweep keeps only its first `points`, fewer than the index it stopped
  // before (a contention point holds several ranks' turns; a stop inside them keeps none).
  virtual void kept_points(std::size_t points) { static_cast<void>(points); }
  virtual void note(const std::string& line) = 0;  // shown once (rank 0)
  // The sweep's results once it ends: `table` is the terminal's text (TextTable::render),
  // `records` every point with its headline metrics (PointsTable::records; rank 0's are full).
  virtual void results(const std::string& table, std::vector<h5::PointRecord> records) {
    (void)table;
    (void)records;
  }
  // The columns the results tables fit (TextTable::render's width; 0: --wide, one line a row).
  virtual std::size_t table_width() const { return h5::kTerminalWidth; }
};

// The cost model of the dry-run's time estimate (docs/user-guide.md): assumed rates, printed
// with every estimate. Each sweep turns its plan into seconds with them.
struct CostAssumptions {
  double device_tflops = 0;      // attention (the default kernel path) and GEMM rate of one rank
  double flash_share = 1;        // the own flash kernels' rate as a share of device_tflops
  double memory_Bps = 0;         // device memory copies of one rank
  double host_memory_Bps = 0;    // STREAM triad of one rank, every rank of the node at once
  double pinned_Bps = 0;         // host <-> device copies from pinned memory (PCIe / C2C)
  double pageable_Bps = 0;       // the same from pageable memory (a staging copy on the way)
  double host_buffer_Bps = 0;    // allocating and first touching (or pinning) host buffers
  double link_Bps = 0;           // bus bandwidth of one rank's link inside a node
  double inter_node_Bps = 0;     // the same between nodes (a group or ring that spans nodes)
  double latency_s = 0;          // per message or collective call
  double point_overhead_s = 0;   // per point: communicators, allocation, kernel plans, checks
  double setup_per_value_s = 0;  // per input value a rank generates (ring and tuning points)
  double check_per_value_s = 0;  // per output value copied back for the parity check (GPU)
  double light_point_s = 0;      // per point of collectives, p2p and ping-pong: barriers only
  double kernel_point_s = 0;     // per point of the compute sweep: buffers and a check
  // A rank's host work (generating inputs, the parity reference, copying results back) slows
  // as more ranks of its node do theirs at once: x (ranks per node / 2)^this above 2 ranks, up
  // to host_contention_ranks (measured to there; held beyond, not extrapolated).
  double host_contention_exponent = 0;
  int host_contention_ranks = 2;

  // The slowdown of a rank's host work with `ranks_per_node` ranks of its node at it.
  double host_contention(int ranks_per_node) const {
    const int ranks = std::min(ranks_per_node, host_contention_ranks);
    return ranks > 2 ? std::pow(ranks / 2.0, host_contention_exponent) : 1.0;
  }

  // FLOP/s of one rank's attention on a kernel path: the naive path at a tenth.
  double attention_flops(const std::string& path) const {
    return device_tflops * 1e12 * (path == "flash" ? flash_share : path == "naive" ? 0.1 : 1.0);
  }
};

// How a sweep gets the kernels and transports of this run's path: the driver fills these in
// (host: Kokkos + MPI; cuda: CUDA kernels + NCCL), so no sweep names a GPU factory.
struct PathFactories {
  // A kernel path from the kernel path table (kernels/kernel_paths.hpp) and its tile variant.
  std::function<std::unique_ptr<attn::AttentionBackend>(const attn::KernelChoice&)>
      attention_backend;
  // The ring's default transport: MPI on the host path, NCCL on the GPU path.
  std::function<std::unique_ptr<ring::RingTransport>(MPI_Comm ring_comm, attn::AttentionBackend&)>
      ring_transport;
  // The copy engines (GPU path; ring/ce_transport.hpp): whether every hop of a ring inside a node
  // can use them (collective over the ring; in_local: this rank's hop in is such a hop), and the
  // transport: the copy engines where both links are local, else mixed (NCCL on the hops that
  // cross nodes). Host path: not usable, and none.
  std::function<ring::CopyEngineProbe(MPI_Comm ring_comm, bool in_local)> copy_engine_probe;
  std::function<std::unique_ptr<ring::RingTransport>(MPI_Comm ring_comm, attn::AttentionBackend&,
                                                     ring::HopLinks links)>
      copy_engine_transport;
  // The collectives of the all-gather, Ulysses and hybrid schemes (host: MPI; cuda: NCCL).
  std::function<std::unique_ptr<ring::GroupTransport>(MPI_Comm group_comm, attn::AttentionBackend&)>
      group_transport;
  // Ulysses' overlapped all-to-alls by the copy engines (ring/ce_group_transport.hpp), the
  // other collectives as group_transport. Host path: none (throws).
  std::function<std::unique_ptr<ring::GroupTransport>(MPI_Comm group_comm, attn::AttentionBackend&)>
      copy_engine_group_transport;
};

// Resources of the GPU path, created once per run by the driver (null on the host path).
struct GpuContext {
  GpuContext(GpuInfo info, MPI_Comm world_comm) : gpu(std::move(info)), comm(world_comm) {}
  GpuInfo gpu;
  MPI_Comm comm;  // the ranks the NCCL communicator spans (all of them)

  // The NCCL communicator over all ranks, made by the first sweep that asks (collective: every
  // rank runs the sweeps in the same order). Not at start: NCCL refuses ranks that share a GPU,
  // which sweeps without NCCL allow (contention's feeders on a 1-GPU node).
  NcclComm& world_nccl() {
    if (!world_) world_ = std::make_unique<NcclComm>(comm);
    return *world_;
  }
  // Whether a sweep has made it yet (its creation time is then world_nccl().creation_seconds()).
  bool has_world_nccl() const { return world_ != nullptr; }

 private:
  std::unique_ptr<NcclComm> world_;
};

struct RunContext {
  const Config& config;
  MPI_Comm world;
  const RankLayout& layout;
  Backend backend;  // resolved: Host or Cuda
  GpuContext* gpu;  // nullptr on the host path
  const PathFactories& paths;
  ProgressReporter& progress;  // this sweep's progress lines
  // The run's group communicators, kept from sweep to sweep; nullptr: the sweep makes its own.
  groups::GroupCache* group_cache = nullptr;
};

struct SweepOutcome {
  bool ok = true;       // false marks the run failed (e.g. a parity check above tolerance)
  std::string failure;  // which point and why; same text on every rank is not required
};

class Sweep {
 public:
  virtual ~Sweep() = default;
  virtual std::string type() const = 0;
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  virtual std::vector<std::string> plan() const = 0;  // one line per point
  // How many points plan() has; sweeps with many points count them without building labels.
  virtual std::size_t point_count() const { return plan().size(); }
  // "20 (+3 warmup)": the timed iterations of each point, for the dry-run's summary.
  virtual std::string iterations_text() const { return "-"; }
  // Seconds the sweep should take at the assumed rates (dry-run estimate, the run's ETA).
  virtual double estimated_seconds(const CostAssumptions& a) const {
    return static_cast<double>(point_count()) * a.point_overhead_s;
  }
  // Host memory one rank's largest point allocates at once, the config key that sets it and
  // what it is: the driver refuses, at that key, what cannot fit in the node's physical memory
  // on every rank of the node (oom::check_host_memory_fits). Empty: nothing sizeable on the host.
  struct HostMemoryNeed {
    std::string key;
    std::uint64_t bytes = 0;
    std::string what;
  };
  virtual std::optional<HostMemoryNeed> host_memory_need() const { return std::nullopt; }
  // The tuned policies this sweep's `kernel: auto` would follow: the driver decides, once the
  // GPU is known, whether each applies (a warning, or an error with `strict`).
  virtual std::vector<std::shared_ptr<KernelPolicyUse>> kernel_policies() const { return {}; }
  // The CP policies `scheme: auto` follows (cp_policy:); the driver decides whether each applies.
  virtual std::vector<std::shared_ptr<CpPolicyUse>> cp_policies() const { return {}; }
  // Whether every rank calls point_started at every point, so that a signal can stop the sweep
  // between two points and keep the ones finished; false: a signal ends the run at once.
  virtual bool stops_between_points() const { return true; }
  virtual std::uint64_t estimated_output_bytes() const = 0;  // for --dry-run
  virtual SweepOutcome run(RunContext& ctx, h5::Group& out) = 0;

 private:
  std::string name_;
};

inline std::string iterations_text(std::int64_t iterations, std::int64_t warmup) {
  return std::to_string(iterations) + " (+" + std::to_string(warmup) + " warmup)";
}

// Plan lines "<label>, N iterations (+W warmup)" of sweeps whose points carry a label.
template <class Points>
std::vector<std::string> timed_plan(const Points& points, std::int64_t iterations,
                                    std::int64_t warmup) {
  std::vector<std::string> lines;
  for (const auto& pt : points)
    lines.push_back(pt.label + ", " + std::to_string(iterations) + " iterations (+" +
                    std::to_string(warmup) + " warmup)");
  return lines;
}

// Collective: the headline records of `table` (every rank), and on rank 0 the terminal table
// `render(records)` makes of them, handed to the progress reporter. Sweeps supply the rows only;
// h5::TextTable formats them, at ctx.progress.table_width(). A headline {metric, OverInner::Cv,
// OverRanks::Slowest} is how a sweep asks the run's summary to flag a noisy point (CV > 5 %).
template <class Render>
void report_results(RunContext& ctx, const h5::PointsTable& table,
                    const std::vector<h5::Headline>& headlines, Render&& render) {
  std::vector<h5::PointRecord> records = table.records(headlines, ctx.world);
  std::string text = ctx.layout.rank == 0 ? render(records) : std::string();
  ctx.progress.results(text, std::move(records));
}

// "== name (type) ==" ("== type ==" when unnamed): the start of the first line of a sweep's results
// table.
inline std::string results_title(const Sweep& s) {
  return "== " + s.name() + (s.name() == s.type() ? "" : " (" + s.type() + ")") + " ==";
}

using SweepParser = std::unique_ptr<Sweep> (*)(const SweepSpec& spec, const ParseContext& ctx);
// A sweep's key table (config/key_spec.hpp): what its parser accepts and defaults, what
// `ringbench --help TYPE` prints and what docs/sweeps/<type>.md is checked against.
using SweepKeys = const std::vector<cfg::KeySpec>& (*)();

}  // namespace rb
