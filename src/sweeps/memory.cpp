#include "sweeps/memory.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include <utility>

#include "host/profiling_kernels.hpp"
#include "config/bytes.hpp"
#include "metrics/stats.hpp"
#include "metrics/table.hpp"
#include "profiling/engine.hpp"
#include "sweeps/oom_point.hpp"

namespace rb {
namespace {

const std::vector<std::string> kCopyKinds = {"d2d", "h2d_pinned", "d2h_pinned", "h2d_pageable",
                                             "d2h_pageable"};

struct MemoryParams {
  int world_size = 1;       // the plan's ranks: each writes its row
  std::uint64_t bytes = 0;  // per array (triad) / per copy
  std::int64_t warmup = 0;  // as parsed: a key left out is its default in memory_keys()
  std::int64_t iterations = 0;
  bool triad = true;
  std::vector<std::string> copies;  // empty on the host backend
};

// The points: the triad (when on), then each copy kind.
std::vector<std::string> memory_points(const MemoryParams& p) {
  std::vector<std::string> kinds;
  if (p.triad) kinds.push_back("triad");
  kinds.insert(kinds.end(), p.copies.begin(), p.copies.end());
  return kinds;
}

class MemorySweep final : public Sweep {
 public:
  explicit MemorySweep(MemoryParams p) : p_(std::move(p)) {}
  std::string type() const override { return "memory"; }
  std::size_t point_count() const override { return (p_.triad ? 1 : 0) + p_.copies.size(); }
  std::string iterations_text() const override {
    return rb::iterations_text(p_.iterations, p_.warmup);
  }
  // Per iteration the triad moves 3 arrays at the host's rate, a device copy reads and writes
  // its size, a host <-> device copy moves it at the pinned or pageable rate; per point, the
  // host buffers are allocated and touched (or pinned) once.
  double estimated_seconds(const CostAssumptions& a) const override {
    const double bytes = static_cast<double>(p_.bytes), runs = p_.iterations + p_.warmup;
    double total = 0;
    for (const auto& kind : memory_points(p_)) {
      const double rate = kind == "triad"                              ? a.host_memory_Bps / 3
                          : kind == "d2d"                              ? a.memory_Bps / 2
                          : kind.find("pageable") != std::string::npos ? a.pageable_Bps
                                                                       : a.pinned_Bps;
      const double buffers =
          a.host_buffer_Bps > 0 ? static_cast<double>(host_bytes(kind)) / a.host_buffer_Bps : 0;
      total += runs * bytes / rate + buffers + a.point_overhead_s;
    }
    return total;
  }
  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    const std::string size = format_bytes(static_cast<double>(p_.bytes));
    if (p_.triad) lines.push_back("host STREAM triad, " + size + " per array, every rank at once");
    for (const auto& k : p_.copies)
      lines.push_back("copy " + k + ", " + size + ", every rank at once");
    return lines;
  }
  // The table as write() lays it out (every dataset counted).
  std::uint64_t estimated_output_bytes() const override {
    return point_table().planned_bytes(static_cast<std::size_t>(p_.world_size));
  }
  SweepOutcome run(RunContext& ctx, h5::Group& out) override;
  // Host bytes one rank allocates at a point of this kind.
  std::uint64_t host_bytes(const std::string& kind) const;
  // The most host bytes one rank allocates at any point.
  std::optional<HostMemoryNeed> host_memory_need() const override;

 private:
  struct Timing {
    std::vector<double> seconds;
    std::size_t moved_bytes = 0;
    std::int64_t wrong = -1;
  };
  h5::PointsTable point_table() const;
  static std::vector<h5::Headline> headlines();
  std::string screen_table(const std::vector<h5::PointRecord>& records, std::size_t width) const;
  Timing measure(const std::string& kind, prof::ComputeEngine& engine) const;
  MemoryParams p_;
};

h5::PointsTable MemorySweep::point_table() const {
  const auto kinds = memory_points(p_);
  h5::PointsTable t(kinds.size());
  t.key("kind", kinds,
        {"1",
         "triad (host STREAM triad), d2d (device to device), h2d/d2h pinned or pageable copies"});
  t.key("size_bytes", std::vector<std::int64_t>(kinds.size(), static_cast<std::int64_t>(p_.bytes)),
        {"B", "bytes per array (triad) or per copy"});
  t.metric("bandwidth_Bps", {"B/s", "moved_bytes / mean iteration time"});
  t.int_metric("moved_bytes",
               {"B",
                "bytes counted per iteration: 3 arrays x size for the triad (STREAM's count: 2 "
                "reads, 1 write), size for a copy (d2d: HBM traffic is twice this)"});
  t.metric("iteration_time_s", {"s", "time of each timed iteration"},
           {static_cast<std::uint64_t>(p_.iterations)}, {"iteration"});
  t.int_metric(
      "wrong_elements",
      {"1",
       "triad: elements of a[] not equal to b + 3c after the runs; -1 for copies (not checked)"});
  t.text_metric("noise_class",
                {"1",
                 "run-to-run noise class of the point (host_transfer: h2d/d2h copies, which cross "
                 "PCIe and host memory; memory otherwise); overrides bandwidth_Bps's noise"});
  oom::declare_columns(t);
  h5::Judging j;
  j.headline = {"bandwidth_Bps"};
  j.noise = "memory";
  j.each_rank = true;
  j.iteration_times = "iteration_time_s";
  t.judging(std::move(j));
  return t;
}

std::vector<h5::Headline> MemorySweep::headlines() {
  using h5::OverInner, h5::OverRanks;
  return {{"bandwidth_Bps", OverInner::None, OverRanks::Min},
          {"bandwidth_Bps", OverInner::None, OverRanks::Max},
          {"iteration_time_s", OverInner::Median, OverRanks::Max},
          {"wrong_elements", OverInner::None, OverRanks::Sum},
          {"status", OverInner::None, OverRanks::Rank0},
          {"iteration_time_s", OverInner::Cv, OverRanks::Slowest}};
}

std::string MemorySweep::screen_table(const std::vector<h5::PointRecord>& records,
                                      std::size_t width) const {
  h5::TextTable t({{"kind", "", true},
                   {"size", "(B)"},
                   {"min rank", "(GB/s)"},
                   {"max rank", "(GB/s)"},
                   {"median time", "(ms)"},
                   {"#wrong"},
                   {"status", "", true}});
  t.repeat({0, 1});
  for (const auto& r : records) {
    // Two headlines share the metric: the first is the min over ranks, the second the max.
    double lo = NAN, hi = NAN;
    for (const auto& f : r.metrics)
      if (f.name == "bandwidth_Bps") (std::isnan(lo) ? lo : hi) = f.number;
    t.row({r.text("kind"), h5::fixed(r.num("size_bytes"), 0), h5::sig3(lo / 1e9),
           h5::sig3(hi / 1e9), h5::sig3(r.num("iteration_time_s") * 1e3),
           h5::fixed(r.num("wrong_elements"), 0), r.text("status")});
  }
  return t.render(results_title(*this) + " memory bandwidth per rank",
                  {"GB/s: moved bytes / mean iteration time of each rank (slowest and fastest "
                   "rank); time: median over iterations, slowest rank; #wrong: triad check "
                   "summed over ranks (- : not checked); status oom: an allocation failed on "
                   "some rank (oom_* in the file)"},
                  width);
}

SweepOutcome MemorySweep::run(RunContext& ctx, h5::Group& out) {
  const int rank = ctx.layout.rank;
  const auto kinds = memory_points(p_);
  const auto labels = plan();
  h5::PointsTable table = point_table();
  const std::unique_ptr<prof::ComputeEngine> engine = prof::make_compute_engine(ctx.backend);
  SweepOutcome outcome;
  std::size_t pi = 0;
  for (; pi < kinds.size(); ++pi) {
    if (!ctx.progress.point_started(pi, labels[pi])) break;  // a signal: the points before are kept
    const std::uint64_t available = oom::meminfo_bytes("MemAvailable");
    RB_MPI_CHECK(MPI_Barrier(ctx.world));
    Timing r;
    const oom::Record ran_out =
        oom::attempt("memory " + kinds[pi], host_bytes(kinds[pi]), ctx.layout.local_size, available,
                     [&] { r = measure(kinds[pi], *engine); });
    const bool oom_point = oom::on_any_rank(ran_out, ctx.world);
    oom::record_status(table, pi, oom_point, ran_out);
    if (oom_point) {
      ctx.progress.note("point " + std::to_string(pi) + " (" + labels[pi] +
                        "): out of memory, skipped");
      continue;
    }
    table.set("bandwidth_Bps", pi, static_cast<double>(r.moved_bytes) / stats::mean(r.seconds));
    table.set_int("moved_bytes", pi, static_cast<std::int64_t>(r.moved_bytes));
    table.set("iteration_time_s", pi, r.seconds);
    table.set_int("wrong_elements", pi, r.wrong);
    const bool host_transfer = kinds[pi].rfind("h2d", 0) == 0 || kinds[pi].rfind("d2h", 0) == 0;
    table.set_text("noise_class", pi, host_transfer ? "host_transfer" : "memory");
    if (r.wrong > 0 && outcome.ok) {
      outcome.ok = false;
      outcome.failure = "memory: rank " + std::to_string(rank) + ": " + kinds[pi] + " produced " +
                        std::to_string(r.wrong) + " wrong elements";
    }
  }
  out.attr("bytes", static_cast<std::int64_t>(p_.bytes));
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  if (p_.copies.empty()) out.attr("copies", "skipped: the host backend has no device");
  table.keep_points(pi);
  table.write(out);
  report_results(ctx, table, headlines(),
                 [&](const auto& r) { return screen_table(r, ctx.progress.table_width()); });
  return outcome;
}

// The triad's three arrays; a copy's pageable or pinned host buffer (device memory is not
// host memory).
std::uint64_t MemorySweep::host_bytes(const std::string& kind) const {
  if (kind == "triad") return 3 * (p_.bytes / 8) * 8;
  return kind == "d2d" ? 0 : p_.bytes;
}

std::optional<Sweep::HostMemoryNeed> MemorySweep::host_memory_need() const {
  std::uint64_t most = 0;
  for (const auto& kind : memory_points(p_)) most = std::max(most, host_bytes(kind));
  return HostMemoryNeed{"bytes", most,
                        "the memory sweep (3 arrays of 'bytes' for the triad, 1 for a host copy)"};
}

// The triad runs on the host (Kokkos) on every backend; the copies on the device.
MemorySweep::Timing MemorySweep::measure(const std::string& kind,
                                         prof::ComputeEngine& engine) const {
  const int warmup = static_cast<int>(p_.warmup), iterations = static_cast<int>(p_.iterations);
  if (kind == "triad") {
    const auto r = prof::host::triad(static_cast<std::size_t>(p_.bytes / 8), warmup, iterations);
    return {r.seconds, r.bytes_per_iteration, static_cast<std::int64_t>(r.wrong)};
  }
  const auto bytes = static_cast<std::size_t>(p_.bytes);
  return {engine.copy(kind, bytes, warmup, iterations), bytes, -1};
}

}  // namespace

const std::vector<cfg::KeySpec>& memory_keys() {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> keys = cfg::sweep_keys(
      "memory",
      {bytes("bytes", "32MiB", 4096, "size of each triad array and of each copy").on_cuda("1GiB"),
       integer("warmup", "2", 0, 100000, "untimed repetitions"),
       integer("iterations", "10", 1, 100000, "timed repetitions, each timed on its own"),
       flag("triad", "true", "run the host triad"),
       choice("copies", "[" + cfg::join(kCopyKinds, ", ") + "]", kCopyKinds,
              "device copies (cuda backend; an error on the host backend)")
           .or_list()});
  return keys;
}

std::unique_ptr<Sweep> parse_memory(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::KeyReader r(spec.node, memory_keys(), ctx.backend);
  MemoryParams p;
  p.bytes = r.bytes("bytes");
  p.warmup = r.integer("warmup");
  p.iterations = r.integer("iterations");
  p.triad = r.flag("triad");
  if (ctx.backend != Backend::Host)
    p.copies = r.choices("copies");
  else if (r.has("copies"))
    spec.node.fail("copies",
                   "device copies need the cuda backend (this run uses the host backend)");
  if (!p.triad && p.copies.empty())
    spec.node.fail("triad",
                   "nothing to measure: triad is false and there are no copies on the host "
                   "backend");
  p.world_size = ctx.world_size;
  return std::make_unique<MemorySweep>(std::move(p));
}

}  // namespace rb
