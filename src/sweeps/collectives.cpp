#include "sweeps/collectives.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>
#include <utility>

#include "config/bytes.hpp"
#include "dtype_names.hpp"
#include "metrics/table.hpp"
#include "profiling/cost_model.hpp"
#include "profiling/groups.hpp"
#include "profiling/engine.hpp"
#include "profiling/timing.hpp"
#include "sweeps/collectives_params.hpp"
#include "sweeps/oom_point.hpp"
#include "sweeps/point_phases.hpp"

namespace rb {
namespace {

// Ranks above which a table keeps a sample of rows per point (docs/hdf5-schema.md, "Rows").
constexpr std::size_t kRankRows = 64;

using coll::Op;
using coll::Transport;

using coll_sweep::CollParams;

struct PointDef {
  Op op;
  std::size_t group;  // index into params.groups
  prof::DType dtype;
  std::uint64_t requested;
  bool in_place;
};

std::string point_label(const CollParams& p, const PointDef& d) {
  return std::string(coll::op_name(d.op)) + " group " + p.groups[d.group].label() + " " +
         prof::dtype_name(d.dtype) + " " + format_bytes(static_cast<double>(d.requested)) +
         (d.in_place ? " in-place" : " out-of-place");
}

// What this rank measured at one point.
struct Measured {
  double time = 0;        // this rank's batch average
  double group_time = 0;  // slowest rank of its group
  std::vector<double> iterations;
  std::int64_t wrong = -1;
  coll::Sizes sizes;
};

class Collectives final : public Sweep {
 public:
  Collectives(CollParams p, int world, int nodes)
      : p_(std::move(p)), world_(world), nodes_(std::max(1, nodes)) {
    for (Op op : p_.ops)
      for (std::size_t g = 0; g < p_.groups.size(); ++g)
        for (prof::DType t : p_.dtypes)
          for (std::uint64_t s : p_.sizes)
            for (bool ip : p_.in_place)
              if (!ip || coll::supports_in_place(op)) points_.push_back({op, g, t, s, ip});
  }
  std::string type() const override { return "collectives"; }
  std::size_t point_count() const override { return points_.size(); }
  std::string iterations_text() const override {
    return rb::iterations_text(p_.iterations, p_.warmup);
  }
  // Per call: a latency plus the size times the operation's bus factor (nccl-tests' busbw
  // over algbw: an all-reduce's 2(n-1)/n) at the link rate of the group's span (inside a node
  // or across nodes; a group of one moves nothing); the iterations run twice (batch and
  // per-call timing), the check once more.
  double estimated_seconds(const CostAssumptions& a) const override {
    double total = 0;
    for (const auto& d : points_) {
      const int n = group_size(p_.groups[d.group]);
      const bool spans_nodes = n > world_ / nodes_;
      const double bus = n > 1 ? coll::busbw_factor(d.op, n) : 0.0;
      const double call = a.latency_s + bus * static_cast<double>(d.requested) /
                                            (spans_nodes ? a.inter_node_Bps : a.link_Bps);
      total += static_cast<double>(2 * p_.iterations + p_.warmup + 1) * call + a.light_point_s;
    }
    return total;
  }

  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    for (const auto& d : points_)
      lines.push_back(point_label(p_, d) + ", " + std::to_string(p_.warmup) + " warmup + " +
                      std::to_string(p_.iterations) + " timed iterations" +
                      (p_.check ? ", data checked" : ""));
    return lines;
  }

  // The points table and the model's as write() lays them out (every dataset counted).
  std::uint64_t estimated_output_bytes() const override {
    const auto series = series_of();
    const std::size_t world = static_cast<std::size_t>(world_);
    return point_table().planned_bytes(world) +
           model_table(series, p_.host ? Transport::Mpi : Transport::Nccl,
                       std::vector<std::int64_t>(points_.size(), 0))
               .planned_bytes(world);
  }

  SweepOutcome run(RunContext& ctx, h5::Group& out) override;
  // Host bytes of an engine whose buffers hold `bytes` (send and receive; 0 on the cuda
  // backend, whose buffers are on the device).
  static std::uint64_t engine_host_bytes(Backend backend, std::size_t bytes) {
    return backend == Backend::Host ? 2 * static_cast<std::uint64_t>(bytes) : 0;
  }
  std::size_t largest_buffer() const {
    return std::max<std::size_t>(static_cast<std::size_t>(p_.max_bytes), 64);
  }
  std::optional<HostMemoryNeed> host_memory_need() const override {
    return HostMemoryNeed{
        "max_bytes", engine_host_bytes(p_.host ? Backend::Host : Backend::Cuda, largest_buffer()),
        "the collectives sweep (send and receive buffers of max_bytes)"};
  }

 private:
  // The engine, with buffers of at least `bytes` (replaced when smaller); a Record when that
  // ran out on this rank. Not collective: the caller agrees over the ranks.
  oom::Record ensure_engine(RunContext& ctx, prof::EngineSetup setup, std::size_t bytes,
                            std::unique_ptr<prof::Engine>& engine, std::size_t& capacity) const;
  static oom::Record reserve_mpi_scratch(const RunContext& ctx, coll::Op op, std::size_t bytes);
  Measured measure(RunContext& ctx, prof::Engine& e, const groups::Group& g, const PointDef& d,
                   PhaseClock& phases) const;
  h5::PointsTable point_table() const;
  // The model's series: the points of each (operation, group, dtype, in_place), sizes ascending,
  // in the order the series first appear.
  std::vector<std::vector<std::size_t>> series_of() const;
  // The model's table of those series, its keys and metrics declared.
  h5::PointsTable model_table(const std::vector<std::vector<std::size_t>>& series,
                              Transport transport,
                              const std::vector<std::int64_t>& group_size) const;
  void record(h5::PointsTable& t, std::size_t pi, const groups::Group& g, const Measured& m) const;
  void write_attributes(h5::Group& out, Transport transport) const;
  std::string screen_table(const std::vector<h5::PointRecord>& records, std::size_t width) const;
  bool has_world_group() const {
    return std::any_of(p_.groups.begin(), p_.groups.end(),
                       [](const groups::Spec& g) { return g.kind == groups::Kind::World; });
  }
  // Returns the fit's terminal table (rank 0).
  std::string fit_model(RunContext& ctx, h5::Group& out, Transport transport,
                        const std::vector<double>& time, const std::vector<std::int64_t>& bytes,
                        const std::vector<std::int64_t>& group_size) const;

  CollParams p_;
  int world_;
  int nodes_;  // planned nodes (ranks spread evenly): the group sizes of intra_node, inter_node

  int group_size(const groups::Spec& g) const {
    switch (g.kind) {
      case groups::Kind::World:
        return world_;
      case groups::Kind::IntraNode:
        return world_ / nodes_;
      case groups::Kind::InterNode:
        return nodes_;
      case groups::Kind::Blocks:
        return g.block;
    }
    return world_;
  }
  std::vector<PointDef> points_;
};

oom::Record Collectives::ensure_engine(RunContext& ctx, prof::EngineSetup setup, std::size_t bytes,
                                       std::unique_ptr<prof::Engine>& engine,
                                       std::size_t& capacity) const {
  if (engine && capacity >= bytes) return {};
  engine.reset();  // the smaller buffers go first
  capacity = 0;
  setup.bytes = bytes;
  // Read before any rank allocates: every rank comes here straight from the previous point's
  // agreement (or the sweep's start), and the buffers are touched only inside make_engine.
  const std::uint64_t available = oom::meminfo_bytes("MemAvailable");
  return oom::attempt("collectives buffers", engine_host_bytes(ctx.backend, bytes),
                      ctx.layout.local_size, available, [&] {
                        engine = prof::make_engine(setup);
                        capacity = bytes;
                      });
}

// MPI allocates working buffers inside its collectives, and a failure there is MPI_ERR_INTERN
// or MPI_ERR_OTHER under MPI_ERRORS_ARE_FATAL: every rank aborts. Open MPI's reductions keep up
// to two messages' worth (reduce-scatter by recursive halving: two temporaries of the whole
// input); the other collectives copy at most one (in place). So that much host memory must be
// there, beside the point's own buffers, before the point runs, or the point is `oom` like a
// buffer that could not be had. NCCL's working memory is set up with its communicator.
oom::Record Collectives::reserve_mpi_scratch(const RunContext& ctx, coll::Op op,
                                             std::size_t bytes) {
  if (ctx.backend != Backend::Host) return {};
  const bool reduces =
      op == coll::Op::AllReduce || op == coll::Op::Reduce || op == coll::Op::ReduceScatter;
  return oom::attempt(reduces ? "MPI's working buffers (two messages' worth)"
                              : "MPI's working buffers (a message's worth)",
                      (reduces ? 2 : 1) * static_cast<std::uint64_t>(bytes), ctx.layout.local_size,
                      oom::meminfo_bytes("MemAvailable"), [] {});
}

// One point: warmup, nccl-tests' batch timing, a per-iteration timing loop and the data check.
Measured Collectives::measure(RunContext& ctx, prof::Engine& e, const groups::Group& g,
                              const PointDef& d, PhaseClock& phases) const {
  coll::Call c = coll::call_for(d.op, d.dtype, d.in_place, static_cast<std::size_t>(d.requested),
                                g.rank, g.size, p_.root % g.size);
  c.send = e.send();
  c.recv = e.recv();

  e.prepare(c);
  phases.lap(Phase::Setup);
  for (std::int64_t w = 0; w < p_.warmup; ++w) e.launch(c, static_cast<std::size_t>(w), d.group);
  e.sync();
  phases.lap(Phase::Warmup);

  // nccl-tests' timing: all ranks (all groups) start together after a barrier, launch the
  // iterations back to back, wait for the stream once; time = elapsed / iterations.
  const std::size_t I = static_cast<std::size_t>(p_.iterations);
  Measured m;
  m.sizes = c.sizes;
  RB_MPI_CHECK(MPI_Barrier(ctx.world));
  const double t0 = prof::now_s();
  for (std::size_t it = 0; it < I; ++it) e.launch(c, it, d.group);
  e.sync();
  m.time = (prof::now_s() - t0) / static_cast<double>(I);

  // A second, separately timed loop for per-iteration times.
  RB_MPI_CHECK(MPI_Barrier(ctx.world));
  m.iterations = e.iteration_times(c, I, d.group);
  phases.lap(Phase::Timed);

  if (p_.check) {
    e.prepare(c);
    e.launch(c, 0, d.group);
    e.sync();
    m.wrong = e.wrong_elements(c);
  }
  phases.lap(Phase::Check);
  // The slowest rank of the group sets the group's bandwidth.
  m.group_time = prof::allreduce_double(m.time, MPI_MAX, g.get());
  return m;
}

h5::PointsTable Collectives::point_table() const {
  const std::size_t P = points_.size();
  h5::PointsTable t(P);
  t.key("operation",
        prof::column<std::string>(points_, [](const PointDef& d) { return coll::op_name(d.op); }),
        {"1", "collective operation"});
  t.key("group",
        prof::column<std::string>(points_,
                                  [&](const PointDef& d) { return p_.groups[d.group].label(); }),
        {"1", "group kind: world, intra_node, inter_node or a group size"});
  t.key("dtype",
        prof::column<std::string>(points_,
                                  [](const PointDef& d) { return prof::dtype_name(d.dtype); }),
        {"1", "element type"});
  t.key("in_place",
        prof::column<std::int64_t>(points_, [](const PointDef& d) { return d.in_place ? 1 : 0; }),
        {"1", "1 when the operation ran in place"});
  t.key("message_size_bytes",
        prof::column<std::int64_t>(points_, [](const PointDef& d) { return d.requested; }),
        {"B", "message size requested (min_bytes * factor^k)"});
  t.metric("time_s", {"s", "this rank's batch average time per operation"});
  t.metric("group_time_s", {"s", "slowest rank of this rank's group (its batch average)"});
  t.metric("algbw_Bps", {"B/s", "size_bytes / group_time_s of this rank's group"});
  t.metric("busbw_Bps",
           {"B/s", "algbw_Bps x the nccl-tests bus factor for this rank's group size"});
  t.int_metric("group_id", {"1",
                            "id of this rank's group (node index for intra_node, local rank for "
                            "inter_node, block index for sizes, 0 for world)"});
  t.int_metric("group_size", {"1", "ranks in this rank's group"});
  t.int_metric("group_rank", {"1", "this rank's rank within its group"});
  t.int_metric("size_bytes", {"B",
                              "size as nccl-tests reports it at this rank's group size (max of "
                              "send and receive bytes per rank); algbw = size / time"});
  t.int_metric("count", {"1",
                         "count argument of the call (elements; per rank / per peer for "
                         "all_gather, reduce_scatter, all_to_all)"});
  t.int_metric(
      "wrong_elements",
      {"1", "output elements of this rank that failed the data check; -1 when not checked"});
  t.metric("iteration_time_s", {"s", "per-call time of each iteration of the second timed loop"},
           {static_cast<std::uint64_t>(p_.iterations)}, {"iteration"});
  oom::declare_columns(t);
  declare_phase_columns(t);
  t.sample_ranks(kRankRows);
  h5::Judging j;
  j.headline = {"busbw_Bps"};
  j.iteration_times = "iteration_time_s";
  // Latency-bound sizes move by tens of percent between two allocations of one machine: a
  // nightly check keeping them cries wolf (compare --min-bytes).
  j.message_size_key = "message_size_bytes";
  t.judging(std::move(j));
  return t;
}

void Collectives::record(h5::PointsTable& t, std::size_t pi, const groups::Group& g,
                         const Measured& m) const {
  const double algbw = coll::algbw(m.sizes.bytes, m.group_time);
  t.set("time_s", pi, m.time);
  t.set("group_time_s", pi, m.group_time);
  t.set("algbw_Bps", pi, algbw);
  t.set("busbw_Bps", pi, algbw * coll::busbw_factor(points_[pi].op, g.size));
  t.set_int("group_id", pi, g.id);
  t.set_int("group_size", pi, g.size);
  t.set_int("group_rank", pi, g.rank);
  t.set_int("size_bytes", pi, static_cast<std::int64_t>(m.sizes.bytes));
  t.set_int("count", pi, static_cast<std::int64_t>(m.sizes.count));
  t.set_int("wrong_elements", pi, m.wrong);
  t.set("iteration_time_s", pi, m.iterations);
}

void Collectives::write_attributes(h5::Group& out, Transport transport) const {
  out.attr("transport", coll::transport_name(transport));
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.attr("check", static_cast<std::int64_t>(p_.check ? 1 : 0));
  out.attr("root", static_cast<std::int64_t>(p_.root));
  out.attr("timing",
           "nccl-tests method: warmup, world barrier, `iterations` back-to-back calls, one "
           "stream sync; time_s = elapsed / iterations on each rank; the point's time is the "
           "max over ranks. iteration_time_s comes from a second loop timed per call.");
}

// The nccl-tests columns of each point: the slowest group's time and bandwidths, the wrong
// elements over all ranks, size and count at the largest group.
std::vector<h5::Headline> screen_headlines() {
  using h5::OverInner, h5::OverRanks;
  return {{"group_time_s", OverInner::None, OverRanks::Max},
          {"algbw_Bps", OverInner::None, OverRanks::Min},
          {"busbw_Bps", OverInner::None, OverRanks::Min},
          {"wrong_elements", OverInner::None, OverRanks::Sum},
          {"size_bytes", OverInner::None, OverRanks::Max},
          {"count", OverInner::None, OverRanks::Max},
          {"group_size", OverInner::None, OverRanks::Max},
          {"status", OverInner::None, OverRanks::Rank0}};
}

std::string redop_of(const std::string& op) {
  return op == "all_reduce" || op == "reduce" || op == "reduce_scatter" ? "sum" : "none";
}

// One row per operation, group, dtype and size; out-of-place and in-place side by side.
std::string Collectives::screen_table(const std::vector<h5::PointRecord>& records,
                                      std::size_t width) const {
  h5::TextTable t({{"operation", "", true},
                   {"group", "", true},
                   {"type", "", true},
                   {"redop", "", true},
                   {"root"},
                   {"size", "(B)"},
                   {"count", "(elements)"},
                   {"time", "(us)"},
                   {"algbw", "(GB/s)"},
                   {"busbw", "(GB/s)"},
                   {"#wrong"},
                   {"time", "(us)"},
                   {"algbw", "(GB/s)"},
                   {"busbw", "(GB/s)"},
                   {"#wrong"}});
  t.span(7, 4, "out-of-place");
  t.span(11, 4, "in-place");
  t.repeat({0, 1, 2, 5});  // operation, group, type, size: which point a row is
  t.droppable({3, 4, 6});  // redop, root, count: the operation, dtype and size imply them
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row_key, omitted;
  for (const auto& r : records) {
    const std::string op = r.text("operation"), group = r.text("group");
    // On one node intra_node is the world again: its rows would repeat the world's.
    const bool same_as_world =
        group != "world" && r.num("group_size") == world_ && has_world_group();
    if (r.num("group_size") < 2 || same_as_world) {
      const std::string why = same_as_world ? "all ranks in one group: the world's rows again"
                                            : "one rank per group: local copies, no link";
      if (std::find(omitted.begin(), omitted.end(), group + " (" + why) == omitted.end())
        omitted.push_back(group + " (" + why);
      continue;
    }
    const std::string key =
        op + "|" + group + "|" + r.text("dtype") + "|" + h5::fixed(r.num("message_size_bytes"), 0);
    auto it = std::find(row_key.begin(), row_key.end(), key);
    if (it == row_key.end()) {
      if (!rows.empty() && rows.back()[0] != op) {  // a blank line between operations
        rows.emplace_back();
        row_key.emplace_back();
      }
      row_key.push_back(key);
      const bool rooted = op == "broadcast" || op == "reduce";
      rows.push_back({op, group, r.text("dtype"), redop_of(op),
                      rooted ? std::to_string(p_.root) : "-1", h5::fixed(r.num("size_bytes"), 0),
                      h5::fixed(r.num("count"), 0), "-", "-", "-", "-", "-", "-", "-", "-"});
      it = row_key.end() - 1;
    }
    auto& row = rows[static_cast<std::size_t>(it - row_key.begin())];
    const std::size_t c = r.num("in_place") == 1 ? 11 : 7;
    if (r.text("status") == "oom") {
      row[c] = "oom";
      continue;
    }
    row[c] = h5::sig3(r.num("group_time_s") * 1e6);
    row[c + 1] = h5::sig3(r.num("algbw_Bps") / 1e9);
    row[c + 2] = h5::sig3(r.num("busbw_Bps") / 1e9);
    row[c + 3] = h5::fixed(r.num("wrong_elements"), 0);
  }
  for (auto& row : rows) t.row(std::move(row));
  std::vector<std::string> notes = {
      "time: the slowest rank of the slowest group (batch average per call); algbw = size / "
      "time, busbw = algbw x the nccl-tests bus factor, slowest group; #wrong: summed over "
      "ranks (- : not checked or not run); oom: a buffer could not be allocated on some rank "
      "(oom_* in the file)"};
  for (const auto& g : omitted)
    notes.push_back("omitted: group " + g + "; its points are in the file and --json)");
  return t.render(results_title(*this) + " collectives like nccl-tests", notes, width);
}

SweepOutcome Collectives::run(RunContext& ctx, h5::Group& out) {
  // Groups of every requested kind; each rank is in one group per kind. Their communicators
  // come from the run's cache: a group an earlier sweep (or spec) made is reused.
  groups::GroupCache own_cache;
  groups::GroupCache& cache = ctx.group_cache != nullptr ? *ctx.group_cache : own_cache;
  std::vector<groups::Group> gs;
  for (const auto& spec : p_.groups) gs.push_back(cache.group(spec, ctx.world, ctx.layout));
  prof::EngineSetup setup;
  setup.backend = ctx.backend;
  setup.world = ctx.world;
  setup.nccl_world = ctx.gpu ? &ctx.gpu->world_nccl() : nullptr;
  setup.groups = &gs;
  // Buffers for the largest message once; if they cannot be had, each point tries buffers of
  // its own size, so the sizes that fit are still measured.
  std::unique_ptr<prof::Engine> engine;
  std::size_t capacity = 0;
  oom::on_any_rank(ensure_engine(ctx, setup, largest_buffer(), engine, capacity), ctx.world);

  const std::size_t P = points_.size();
  h5::PointsTable table = point_table();
  std::vector<double> time(P);
  std::vector<std::int64_t> bytes(P), group_size(P), wrong(P);
  std::size_t pi = 0;
  for (; pi < P; ++pi) {
    const PointDef& d = points_[pi];
    const groups::Group& g = gs[d.group];
    // A signal: the points before are kept; the later ones keep time 0, left out of the fit.
    if (!ctx.progress.point_started(pi, point_label(p_, d))) break;
    PhaseClock phases;
    const std::size_t need = std::max<std::size_t>(static_cast<std::size_t>(d.requested), 64);
    oom::Record ran_out = ensure_engine(ctx, setup, need, engine, capacity);
    if (!ran_out.ran_out()) ran_out = reserve_mpi_scratch(ctx, d.op, need);
    const bool oom_point = oom::on_any_rank(ran_out, ctx.world);
    oom::record_status(table, pi, oom_point, ran_out);
    // The sample's order: the slowest rank first, at an oom point the ranks that ran out.
    if (ran_out.ran_out()) table.order(pi, static_cast<double>(ran_out.requested));
    group_size[pi] = g.size;
    if (oom_point) {  // time and bytes 0: left out of the fit
      phases.lap(Phase::Setup);
      record_phases(table, pi, phases);
      ctx.progress.note("point " + std::to_string(pi) + " (" + point_label(p_, d) +
                        "): out of memory, skipped");
      continue;
    }
    const Measured m = measure(ctx, *engine, g, d, phases);
    record(table, pi, g, m);
    phases.lap(Phase::Write);
    record_phases(table, pi, phases);
    table.order(pi, m.time);
    time[pi] = m.time;
    bytes[pi] = static_cast<std::int64_t>(m.sizes.bytes);
    wrong[pi] = std::max<std::int64_t>(m.wrong, 0);
  }
  const coll::Transport transport = ctx.backend == Backend::Cuda ? Transport::Nccl : Transport::Mpi;
  write_attributes(out, transport);
  table.keep_points(pi);
  table.write(out);

  // The point's figures over all ranks: the slowest rank's time, the largest size and group
  // (groups of one kind can differ in size on uneven nodes), the wrong elements summed.
  const int n = static_cast<int>(P);
  RB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, time.data(), n, MPI_DOUBLE, MPI_MAX, ctx.world));
  RB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bytes.data(), n, MPI_INT64_T, MPI_MAX, ctx.world));
  RB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, group_size.data(), n, MPI_INT64_T, MPI_MAX, ctx.world));
  RB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, wrong.data(), n, MPI_INT64_T, MPI_SUM, ctx.world));
  const std::string fit_text = fit_model(ctx, out, transport, time, bytes, group_size);
  report_results(ctx, table, screen_headlines(), [&](const auto& r) {
    return screen_table(r, ctx.progress.table_width()) + fit_text;
  });

  SweepOutcome outcome;
  for (std::size_t pi = 0; pi < P && outcome.ok; ++pi)
    if (wrong[pi] > 0) {
      outcome.ok = false;
      outcome.failure = "collectives: " + point_label(p_, points_[pi]) + ": " +
                        std::to_string(wrong[pi]) + " wrong elements over all ranks (data check)";
    }
  return outcome;
}

std::vector<std::vector<std::size_t>> Collectives::series_of() const {
  std::vector<std::vector<std::size_t>> series;  // point indices, sizes ascending
  std::map<std::tuple<int, std::size_t, int, bool>, std::size_t> index;
  for (std::size_t pi = 0; pi < points_.size(); ++pi) {
    const auto& d = points_[pi];
    const auto key =
        std::make_tuple(static_cast<int>(d.op), d.group, static_cast<int>(d.dtype), d.in_place);
    auto it = index.emplace(key, series.size()).first;
    if (it->second == series.size()) series.emplace_back();
    series[it->second].push_back(pi);
  }
  return series;
}

h5::PointsTable Collectives::model_table(const std::vector<std::vector<std::size_t>>& series,
                                         Transport transport,
                                         const std::vector<std::int64_t>& group_size) const {
  h5::PointsTable model(series.size());
  std::vector<std::string> op, group, tr, dtype;
  std::vector<std::int64_t> in_place, gsize;
  for (const auto& s : series) {
    const auto& d = points_[s.front()];
    op.push_back(coll::op_name(d.op));
    group.push_back(p_.groups[d.group].label());
    tr.push_back(coll::transport_name(transport));
    dtype.push_back(prof::dtype_name(d.dtype));
    in_place.push_back(d.in_place ? 1 : 0);
    gsize.push_back(group_size[s.front()]);
  }
  model.key("operation", op, {"1", "operation of the series"});
  model.key("group", group, {"1", "group kind of the series"});
  model.key("transport", tr, {"1", "nccl or mpi"});
  model.key("dtype", dtype, {"1", "element type of the series"});
  model.key("in_place", in_place, {"1", "1 for in-place series"});
  model.key("group_size", gsize, {"1", "ranks per group of the series (the largest group)"});
  model.metric("alpha_s", {"s", "fitted latency (time of a zero-byte operation)"});
  model.metric(
      "beta_Bps",
      {"B/s", "fitted asymptotic algorithm bandwidth; inf when time does not grow with size"});
  model.metric(
      "bus_beta_Bps",
      {"B/s", "beta_Bps x bus factor: the bus bandwidth, for extrapolating to other group sizes"});
  model.metric("fit_rel_error", {"1", "relative RMS error of the fit over the series' points"});
  model.int_metric("fit_points", {"1", "points of the series the fit used (size > 0)"});
  // Every rank writes the same fit: a sample of rows says it as well as every rank.
  model.sample_ranks(kRankRows);
  return model;
}

// The alpha-beta model, one series per (operation, group, dtype, in_place), fitted to the
// points' slowest-rank times; every rank fits the same numbers and writes them in its row.
std::string Collectives::fit_model(RunContext& ctx, h5::Group& out, Transport transport,
                                   const std::vector<double>& time,
                                   const std::vector<std::int64_t>& bytes,
                                   const std::vector<std::int64_t>& group_size) const {
  const std::vector<std::vector<std::size_t>> series = series_of();
  const std::size_t S = series.size();
  h5::PointsTable model = model_table(series, transport, group_size);
  std::vector<std::string> group;
  std::vector<std::int64_t> gsize;
  for (const auto& s : series) {
    group.push_back(p_.groups[points_[s.front()].group].label());
    gsize.push_back(group_size[s.front()]);
  }

  std::set<std::size_t> single_rank_groups_noted;
  h5::TextTable fits({{"operation", "", true},
                      {"group", "", true},
                      {"type", "", true},
                      {"variant", "", true},
                      {"alpha", "(us)"},
                      {"beta", "(GB/s)"},
                      {"bus beta", "(GB/s)"},
                      {"fit error", "(%)"}});
  for (std::size_t si = 0; si < S; ++si) {
    std::vector<cost::Point> pts;
    for (std::size_t pi : series[si])
      if (bytes[pi] > 0) pts.push_back({static_cast<double>(bytes[pi]), time[pi]});
    const cost::Fit f = cost::fit_alpha_beta(pts);
    const PointDef& d = points_[series[si].front()];
    model.set_int("fit_points", si, static_cast<std::int64_t>(f.points));
    if (f.ok) {
      model.set("alpha_s", si, f.alpha_s);
      model.set("beta_Bps", si, f.beta_Bps);
      model.set("bus_beta_Bps", si,
                f.beta_Bps * coll::busbw_factor(d.op, static_cast<int>(gsize[si])));
      model.set("fit_rel_error", si, f.rel_rms_error);
    }
    // One fit row per series under the results table. Groups of one rank (inter_node on a
    // single node) only copy locally: one line says so instead of bandwidths that describe
    // no link.
    if (gsize[si] < 2) {
      if (single_rank_groups_noted.insert(d.group).second)
        ctx.progress.note("group " + p_.groups[d.group].label() +
                          ": every group has one rank, so its operations are local copies and "
                          "measure no link (its points are kept in the file)");
      continue;
    }
    // As in the results table: on one node intra_node repeats the world's series.
    if (group[si] != "world" && gsize[si] == world_ && has_world_group()) continue;
    fits.row({coll::op_name(d.op), group[si], prof::dtype_name(d.dtype),
              d.in_place ? "in-place" : "out-of-place", h5::sig3(f.alpha_s * 1e6),
              h5::sig3(f.beta_Bps / 1e9),
              h5::sig3(f.beta_Bps * coll::busbw_factor(d.op, static_cast<int>(gsize[si])) / 1e9),
              h5::fixed(f.rel_rms_error * 100, 0)});
  }
  h5::Group g = out.group("model");
  g.attr("formula",
         "t(m) = alpha_s + m / beta_Bps; m = the points' size_bytes (largest over ranks), t = "
         "their time_s (slowest rank); fit: least squares on relative error (weights 1/t^2)");
  model.write(g);
  return fits.render("  alpha-beta fit per series, t(m) = alpha + m / beta (model/ in the file):",
                     {}, ctx.progress.table_width());
}

}  // namespace

std::unique_ptr<Sweep> parse_collectives(const SweepSpec& spec, const ParseContext& ctx) {
  return std::make_unique<Collectives>(coll_sweep::parse(spec, ctx), ctx.world_size,
                                       ctx.node_count);
}

}  // namespace rb
