#include "sweeps/memory.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "host/profiling_kernels.hpp"
#include "runtime/binding.hpp"
#include "profiling/timing.hpp"

#ifdef RINGBENCH_HAVE_CUDA
#include "cuda/profiling/profiling_cuda.hpp"
#endif

namespace rb {
namespace {

const std::vector<std::string> kCopyKinds = {"d2d", "h2d_pinned", "d2h_pinned", "h2d_pageable",
                                             "d2h_pageable"};

struct MemoryParams {
  std::uint64_t bytes = 0;        // per array (triad) / per copy
  std::int64_t warmup = 2;
  std::int64_t iterations = 10;
  bool triad = true;
  std::vector<std::string> copies;  // empty on the host backend
};

class MemorySweep final : public Sweep {
 public:
  explicit MemorySweep(MemoryParams p) : p_(std::move(p)) {}
  std::string type() const override { return "memory"; }
  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    if (p_.triad) lines.push_back("host STREAM triad, " + std::to_string(p_.bytes) + " B per array, every rank at once");
    for (const auto& k : p_.copies) lines.push_back("copy " + k + ", " + std::to_string(p_.bytes) + " B, every rank at once");
    return lines;
  }
  std::uint64_t estimated_output_bytes() const override {
    return (1 + p_.copies.size()) * static_cast<std::uint64_t>(p_.iterations + 2) * 8u * 64u + 4096;
  }
  SweepOutcome run(RunContext& ctx, h5::Group& out) override;

 private:
  MemoryParams p_;
};

SweepOutcome MemorySweep::run(RunContext& ctx, h5::Group& out) {
  const int rank = ctx.layout.rank;
  const std::size_t I = static_cast<std::size_t>(p_.iterations);
  ProgressReporter& progress = ctx.progress;
  std::size_t point = 0;
  SweepOutcome outcome;

  // Where this rank's memory sits, so the analysis can group ranks by NUMA domain.
  std::int64_t numa = -1;
  try {
    numa = Topology::load_this_machine().current_numa_node();
  } catch (const std::exception&) {
    numa = -1;
  }
  out.attr("bytes", static_cast<std::int64_t>(p_.bytes));
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.write_per_rank("numa_node", numa, {"1", "NUMA node os index covering this rank's CPU binding; -1 when several or unknown"});

  if (p_.triad) {
    progress.point_started(point++, plan()[0]);
    RB_MPI_CHECK(MPI_Barrier(ctx.world));
    const auto r = prof::host::triad(static_cast<std::size_t>(p_.bytes / 8), static_cast<int>(p_.warmup),
                                     static_cast<int>(p_.iterations));
    const double best = *std::min_element(r.seconds.begin(), r.seconds.end());
    const double bytes = static_cast<double>(r.bytes_per_iteration);
    out.attr("triad_bytes_per_iteration", static_cast<std::int64_t>(r.bytes_per_iteration));
    out.write_per_rank("triad_Bps", bytes / best, {"B/s", "STREAM triad bandwidth of the best iteration (3 arrays x 8 B per element)"});
    out.write_per_rank("triad_mean_Bps", bytes / prof::mean_of(r.seconds), {"B/s", "STREAM triad bandwidth over the mean iteration time"});
    out.write_per_rank("triad_iteration_s", r.seconds, {I}, {"s", "time of each timed triad iteration"});
    out.write_per_rank("triad_wrong_elements", static_cast<std::int64_t>(r.wrong), {"1", "elements of a[] not equal to b + 3c after the runs"});
    if (r.wrong) {
      outcome.ok = false;
      outcome.failure = "memory: rank " + std::to_string(rank) + ": triad produced " + std::to_string(r.wrong) + " wrong elements";
    }
  }

  std::vector<std::string> done;
#ifdef RINGBENCH_HAVE_CUDA
  if (!p_.copies.empty()) {
    prof::cuda::Stream stream;
    for (const auto& kind : p_.copies) {
      progress.point_started(point++, "copy " + kind + ", " + std::to_string(p_.bytes) + " B, every rank at once");
      RB_MPI_CHECK(MPI_Barrier(ctx.world));
      const auto s = prof::cuda::copy_seconds(kind, static_cast<std::size_t>(p_.bytes), static_cast<int>(p_.warmup),
                                              static_cast<int>(p_.iterations), stream.get());
      const double bw = static_cast<double>(p_.bytes) / prof::mean_of(s);
      out.write_per_rank(kind + "_Bps", bw,
                         {"B/s", "bytes copied / mean copy time (" + kind +
                                     (kind == "d2d" ? "; HBM traffic is twice this: each byte is read and written)" : ")")});
      out.write_per_rank(kind + "_iteration_s", s, {I}, {"s", "time of each timed copy (" + kind + ")"});
    }
  }
#endif
  if (p_.copies.empty()) out.attr("copies", "skipped: the host backend has no device");
  return outcome;
}

}  // namespace

std::unique_ptr<Sweep> parse_memory(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::Node& n = spec.node;
  n.allow_only({"type", "name", "bytes", "warmup", "iterations", "triad", "copies"});
  MemoryParams p;
  const bool host = ctx.backend == Backend::Host;
  p.bytes = n.get_bytes("bytes", host ? (32u << 20) : (1u << 30), 4096);
  p.warmup = n.get_int("warmup", p.warmup, 0, 100000);
  p.iterations = n.get_int("iterations", p.iterations, 1, 100000);
  p.triad = n.get_bool("triad", true);
  if (host) {
    if (n.has("copies"))
      n.fail("copies", "device copies need the cuda backend (this run uses the host backend)");
  } else {
    p.copies = n.get_choice_list("copies", kCopyKinds, kCopyKinds);
  }
  if (!p.triad && p.copies.empty())
    n.fail("triad", "nothing to measure: triad is false and there are no copies on the host backend");
  return std::make_unique<MemorySweep>(std::move(p));
}

}  // namespace rb
