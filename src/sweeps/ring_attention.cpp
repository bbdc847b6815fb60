#include "sweeps/ring_attention.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>
#include <utility>

#include "dtype.hpp"
#include "config/policy_file.hpp"
#include "kernel_paths.hpp"
#include "kernel_policy.hpp"
#include "metrics/stats.hpp"
#include "metrics/table.hpp"
#include "ring/allgather_attention.hpp"
#include "ring/hybrid_attention.hpp"
#include "ring/inputs.hpp"
#include "ring/parity.hpp"
#include "ring/problem.hpp"
#include "ring/ring_attention.hpp"
#include "ring/ring_comms.hpp"
#include "ring/ring_order.hpp"
#include "ring/ulysses_attention.hpp"
#include "sweeps/oom_point.hpp"
#include "sweeps/point_phases.hpp"
#include "sweeps/ring_attention_parts.hpp"

namespace rb {
namespace {

using namespace ring_sweep;

std::string short_number(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

std::vector<double> medians(const std::vector<std::vector<double>>& per_step) {
  std::vector<double> m;
  for (const auto& samples : per_step) m.push_back(stats::median(samples));
  return m;
}

bool on_any_rank(MPI_Comm world, bool mine) {
  int local = mine ? 1 : 0, any = 0;
  RB_MPI_CHECK(MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, world));
  return any != 0;
}

// This rank's inputs of one point, in storage bytes; kept for the dump.
// The worst relative error over the world (every ring) against the tolerance: empty when
// within it, else which tensor and by how much (the same text on every rank).
// The attending pairs this rank computes per step: the ring's and all-gather's split the work
// by query rows (ring::step_pairs, per K/V owner); Ulysses gives every rank heads / group of the
// heads over the whole sequence, i.e. an equal share of all pairs, in its one step.
std::vector<std::int64_t> scheme_step_pairs(const Point& pt, int ring_rank) {
  if (pt.scheme == ring::Scheme::Hybrid) {  // its inner ring's steps, padded to R
    const ring::Problem inner = ring::hybrid_inner_problem(pt.problem, pt.ulysses_degree);
    std::vector<std::int64_t> out = ring::step_pairs(inner, ring_rank / pt.ulysses_degree);
    out.resize(static_cast<std::size_t>(pt.problem.ring_size), 0);
    return out;
  }
  if (pt.scheme != ring::Scheme::Ulysses) return ring::step_pairs(pt.problem, ring_rank);
  const int R = pt.problem.ring_size;
  std::int64_t total = 0;
  for (int r = 0; r < R; ++r)
    for (std::int64_t x : ring::step_pairs(pt.problem, r)) total += x;
  std::vector<std::int64_t> out(static_cast<std::size_t>(R), 0);
  out[0] = total / R;
  return out;
}

std::string parity_verdict(MPI_Comm world, const ring::ParityReport& par, double tolerance) {
  const double mine[4] = {par.out.max_rel, par.dq.max_rel, par.dk.max_rel, par.dv.max_rel};
  double local[4], worst[4];
  for (int i = 0; i < 4; ++i) local[i] = std::isnan(mine[i]) ? -1.0 : mine[i];
  RB_MPI_CHECK(MPI_Allreduce(local, worst, 4, MPI_DOUBLE, MPI_MAX, world));
  const char* names[4] = {"out", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i)
    if (worst[i] > tolerance)
      return std::string(names[i]) + " max rel error " + short_number(worst[i]) + " > tolerance " +
             short_number(tolerance);
  return "";
}

// What this rank measured at one point; record() puts it into the points table.
class RingAttentionSweep final : public Sweep {
 public:
  RingAttentionSweep(RingParams p, std::vector<Point> points)
      : p_(std::move(p)), points_(std::move(points)) {}
  std::string type() const override { return "ring_attention"; }
  // One table per ring size for the per-step metrics (steps/R<R>), sized by that ring.
  struct StepTable {
    std::int64_t ring_size = 1;
    std::vector<std::size_t> points;  // the sweep's points of this ring size, in order
    h5::PointsTable table{0};
  };

  std::vector<std::string> plan() const override {
    return timed_plan(points_, p_.iterations, p_.warmup);
  }
  std::size_t point_count() const override { return points_.size(); }
  std::string iterations_text() const override {
    return rb::iterations_text(p_.iterations, p_.warmup);
  }
  // Per point and iteration: this rank's attention FLOPs at the device rate plus the bytes its
  // scheme sends at the link rate (ring: R - 1 hops of K and V; backward: 2.5x the FLOPs, K, V,
  // dK, dV hops; the other schemes' collectives: ring::bytes_sent_per_iteration).
  // Per point besides: the set-up (a fixed part and the inputs this rank generates: Q, K, V
  // and dO, per value), the parity check (ring::parity_seconds) and, on the GPU, the outputs
  // it copies back for the check (O, dQ, dK, dV: as many values as the inputs).
  double estimated_seconds(const CostAssumptions& a) const override {
    const double rate = a.attention_flops(p_.kernel);
    const double host = a.host_contention(p_.ranks_per_node);
    double total = 0;
    for (const Point& pt : points_) {
      const ring::Problem& pr = pt.problem;
      const double rows = static_cast<double>(pr.local_rows());
      double flop =
          4.0 * pr.batch * pr.heads * pr.head_dim * rows * static_cast<double>(pr.seq_len);
      if (pr.causal) flop /= 2;
      if (p_.backward) flop *= 3.5;
      const double step_bytes = static_cast<double>(
          ring::bytes_sent_per_iteration(pr, pt.scheme, p_.backward, pt.ulysses_degree));
      const double link = pr.ring_size > p_.ranks_per_node ? a.inter_node_Bps : a.link_Bps;
      const double iteration = flop / rate + step_bytes / link + (pr.ring_size - 1) * a.latency_s;
      // Q, K, V (and dO) generated; as many values (O, dQ, dK, dV) copied back for the check.
      const double inputs = static_cast<double>(pr.shard_elements()) * (p_.backward ? 2 : 1) +
                            2.0 * static_cast<double>(pr.kv_shard_elements());
      const double parity = ring::parity_seconds(pr, parity_options(), p_.backward);
      const double outputs = parity > 0 ? inputs : 0;
      // The overlap calibration runs the ring's compute and transfers once more per repeat, apart.
      const bool calibrated = pr.ring_size > 1 && pt.scheme == ring::Scheme::Ring;
      const double runs =
          static_cast<double>(p_.iterations + p_.warmup + (calibrated ? p_.overlap_repeats : 0));
      total += runs * iteration + a.point_overhead_s +
               host * (a.setup_per_value_s * inputs + parity + a.check_per_value_s * outputs);
    }
    return total;
  }
  std::vector<std::shared_ptr<KernelPolicyUse>> kernel_policies() const override {
    if (p_.policy && p_.kernel == "auto") return {p_.policy};
    return {};
  }
  std::vector<std::shared_ptr<CpPolicyUse>> cp_policies() const override {
    if (p_.cp_policy) return {p_.cp_policy};
    return {};
  }

  // The tables as write() lays them out (every dataset counted), and the dump.
  std::uint64_t estimated_output_bytes() const override {
    const std::size_t world = static_cast<std::size_t>(p_.world_size);
    std::uint64_t total = make_table(p_.backend == Backend::Host).planned_bytes(world);
    for (const StepTable& st : step_tables()) total += st.table.planned_bytes(world);
    if (p_.dump && !points_.empty())
      total += 8ull * 8 * static_cast<std::uint64_t>(points_[0].problem.shard_elements()) *
               static_cast<std::uint64_t>(p_.world_size);
    return total;
  }

  SweepOutcome run(RunContext& ctx, h5::Group& out) override;

 private:
  double tolerance(const ring::Problem& prob) const {
    return ring::tolerance_for(prob.dtype, p_.tolerance);
  }
  // scheme: auto's points as the driver's decision on the CP policy leaves them.
  void settle_auto_points();
  // What auto follows here (the driver has decided whether the policy applies).
  attn::PolicySource policy_source() const {
    if (p_.kernel != "auto") return {nullptr, "none: kernel " + p_.kernel + " named"};
    return p_.policy ? p_.policy->source : attn::PolicySource{};
  }
  void write_attributes(h5::Group& out, const attn::AttentionBackend& backend,
                        ProgressReporter& progress) const;
  h5::PointsTable make_table(bool host) const;
  std::vector<StepTable> step_tables() const;
  PointResult run_point(RunContext& ctx, attn::AttentionBackend& backend, ring::RingComms& comms,
                        std::size_t pi, h5::Group& out, PhaseClock& phases) const;
  void warn_spread_rings(RunContext& ctx, const std::vector<int>& node_of) const;
  void time_iterations(MPI_Comm world, ring::ContextParallelAttention& ra, PointResult& r,
                       PhaseClock& phases) const;
  // The scheme's object for a point, with the transport it needs (kept in `keep`).
  // Records in `r` which transport moves the data, and why.
  std::unique_ptr<ring::ContextParallelAttention> make_scheme(
      const RunContext& ctx, const Point& pt, attn::AttentionBackend& backend, MPI_Comm group,
      std::unique_ptr<ring::RingTransport>& ring_tr,
      std::unique_ptr<ring::GroupTransport>& group_tr, PointResult& r) const;
  std::unique_ptr<ring::RingTransport> make_ring_transport(const RunContext& ctx, const Point& pt,
                                                           attn::AttentionBackend& backend,
                                                           MPI_Comm ring_comm,
                                                           PointResult& r) const;
  ring::ParityOptions parity_options() const;
  void check_point(MPI_Comm world, MPI_Comm ring_comm, const ring::RingResult& res,
                   const ring::Problem& prob, PointResult& r) const;
  RingParams p_;
  std::vector<Point> points_;
};

void RingAttentionSweep::write_attributes(h5::Group& out, const attn::AttentionBackend& backend,
                                          ProgressReporter& progress) const {
  const bool host = !backend.on_device();
  out.attr("batch", static_cast<std::int64_t>(p_.batch));
  out.attr("num_heads", static_cast<std::int64_t>(p_.num_heads));
  out.attr("num_kv_heads", static_cast<std::int64_t>(p_.num_kv_heads));
  out.attr("head_dim", static_cast<std::int64_t>(p_.head_dim));
  out.attr("causal", static_cast<std::int64_t>(p_.causal));
  out.attr("seq_lengths", p_.seq_lengths);
  out.attr("ring_sizes", p_.ring_sizes);
  out.attr("segment_lengths", p_.segment_lengths);
  out.attr("dilation_rates", p_.dilation_rates);
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.attr("backward", static_cast<std::int64_t>(p_.backward));
  out.attr("seed", p_.seed);
  out.attr("kernel", p_.kernel);
  out.attr("kernel_tile", p_.kernel_tile);
  out.attr("attention_backend", backend.name());
  out.attr("transport", host ? "mpi" : "per point: the transport column");
  out.attr("ring_order", ring::to_string(p_.ring_order));
  out.attr("flop_convention", kFlopConvention);
  if (!host) return;
  const std::string note = "host path: Q/K/V/dO stored as " + cfg::join(p_.dtypes, ", ") +
                           ", converted to fp32 for compute; outputs, log-sum-exp and "
                           "gradient accumulators fp32";
  out.attr("precision_note", note);
  progress.note(note);
}

h5::PointsTable RingAttentionSweep::make_table(bool host) const {
  h5::PointsTable t(points_.size());
  std::vector<std::int64_t> seq, rs, nr;
  std::vector<std::string> layout, dtype, compute, kernel, tile, policy, label, scheme, asked,
      cp_source, transport;
  std::vector<std::int64_t> ulysses, head_groups;
  std::vector<double> tol;
  for (const Point& pt : points_) {
    seq.push_back(pt.problem.seq_len);
    rs.push_back(pt.problem.ring_size);
    nr.push_back(pt.num_rings);
    layout.push_back(ring::to_string(pt.problem.layout));
    scheme.push_back(ring::to_string(pt.scheme));
    asked.push_back(pt.scheme_auto ? "auto" : ring::to_string(pt.scheme));
    cp_source.push_back(pt.scheme_source);
    transport.push_back(ring::to_string(pt.transport));
    ulysses.push_back(pt.ulysses_degree);
    head_groups.push_back(pt.head_groups);
    dtype.push_back(ring::to_string(pt.problem.dtype));
    compute.push_back(host ? "fp32" : ring::to_string(pt.problem.dtype));
    kernel.push_back(p_.kernel);
    tile.push_back(p_.kernel_tile);
    policy.push_back(policy_source().description);
    label.push_back(pt.label);
    tol.push_back(tolerance(pt.problem));
  }
  t.key("seq_len", std::move(seq), {"1", "total sequence length S (all ranks of a ring together)"});
  t.key("ring_size", std::move(rs), {"1", "ranks per ring R"});
  t.key("num_rings", std::move(nr), {"1", "concurrent rings (world / R)"});
  t.key("layout", std::move(layout),
        {"1", "sequence layout over the ring: contiguous, zigzag or striped"});
  t.key("scheme", std::move(scheme),
        {"1",
         "context-parallel scheme: ring, allgather, ulysses or hybrid (docs/ring-attention.md, "
         "schemes)"});
  t.key("scheme_asked", std::move(asked), {"1", "the scheme the config named, or auto"});
  t.key("cp_policy", std::move(cp_source),
        {"1",
         "where scheme: auto's choice came from: the CP policy file and its sha256, built-in "
         "(no file, the file not applied and why, or no measured shape within reach: ring), "
         "or none: scheme X named"});
  t.key("transport_asked", std::move(transport),
        {"1",
         "how the config asked the ring's K/V to travel: auto, nccl or copy_engine (what ran: "
         "transport)"});
  t.key("ulysses_degree", std::move(ulysses),
        {"1",
         "ranks that split the heads: hybrid's ulysses_degree, the ring size under ulysses, 1 "
         "otherwise"});
  t.key("ulysses_head_groups", std::move(head_groups),
        {"1",
         "Ulysses' head-group pipeline: each rank's heads in this many groups, each group's "
         "all-to-all overlapping the group before's attention; 1 otherwise"});
  t.key("dtype", std::move(dtype), {"1", "storage dtype of Q, K, V, dO"});
  t.key("compute_dtype", std::move(compute),
        {"1", "dtype the block kernels compute in (fp32 on the host)"});
  t.key("kernel", std::move(kernel), {"1", "kernel path asked for (kernel: in the config)"});
  t.key("kernel_tile", std::move(tile),
        {"1", "tile variant asked for (kernel_tile: in the config)"});
  t.key("kernel_policy", std::move(policy),
        {"1",
         "where kernel: auto's rule came from: built-in, or the tuned policy file and its "
         "sha256, or built-in with why the file was not applied"});
  t.key("label", std::move(label), {"1", "the point's plan line"});
  t.key("tolerance", std::move(tol), {"1", "largest *_max_rel before the point is parity_failed"});
  declare_metrics(t, static_cast<std::uint64_t>(p_.iterations));
  declare_block_calls(t, host);
  declare_phase_columns(t);
  t.sample_ranks(kRankRows);
  h5::Judging j;
  j.headline = {"total_time_s"};
  j.noise = "ring";
  j.lower = {"peak_memory_bytes"};
  j.iteration_times = "total_time_s";
  t.judging(std::move(j));
  return t;
}

std::vector<RingAttentionSweep::StepTable> RingAttentionSweep::step_tables() const {
  std::vector<std::int64_t> sizes;
  for (const Point& pt : points_) sizes.push_back(pt.problem.ring_size);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<StepTable> out;
  for (const std::int64_t R : sizes) {
    StepTable st;
    st.ring_size = R;
    for (std::size_t pi = 0; pi < points_.size(); ++pi)
      if (points_[pi].problem.ring_size == R) st.points.push_back(pi);
    st.table = h5::PointsTable(st.points.size());
    std::vector<std::int64_t> index(st.points.begin(), st.points.end());
    st.table.key("sweep_point", std::move(index),
                 {"1", "the sweep's point (its row of the sweep's points/<key>) this row is"});
    declare_step_metrics(st.table, static_cast<std::uint64_t>(R));
    st.table.sample_ranks(kStepRows);
    out.push_back(std::move(st));
  }
  return out;
}

// The step tables' place under the sweep: steps/R<R>, with what their rows are.
void write_step_tables(h5::Group& out, const std::vector<RingAttentionSweep::StepTable>& tables) {
  h5::Group steps = out.group("steps");
  steps.attr("rows",
             "every rank up to " + std::to_string(kStepRows) + " ranks; above, " +
                 std::to_string(kStepRows) +
                 " ranks per point at evenly spaced quantiles of the median total time, the "
                 "slowest first (row_rank says which)");
  for (const auto& st : tables) {
    h5::Group g = steps.group("R" + std::to_string(st.ring_size));
    g.attr("ring_size", st.ring_size);
    st.table.write(g);
  }
}

// Every world rank's node (collective): ring membership is decided from it, the same on every rank.
std::vector<int> nodes_of_world(const RunContext& ctx) {
  std::vector<int> node_of(static_cast<std::size_t>(ctx.layout.world_size));
  int mine = ctx.layout.node_index;
  RB_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, node_of.data(), 1, MPI_INT, ctx.world));
  return node_of;
}

// Once per run (rank 0): the first ring that would fit in one node yet spans several, and how
// many more do.
void RingAttentionSweep::warn_spread_rings(RunContext& ctx, const std::vector<int>& node_of) const {
  if (ctx.layout.rank != 0) return;
  std::string first;
  int more = 0;
  for (const auto R : p_.ring_sizes)
    for (const auto& members : ring::form_rings(node_of, static_cast<int>(R), p_.ring_order)) {
      const std::string w = ring::spread_warning(
          ring::place_in_ring(members.front(), node_of, static_cast<int>(R), p_.ring_order),
          node_of);
      if (w.empty()) continue;
      if (first.empty())
        first = w;
      else
        ++more;
    }
  if (first.empty()) return;
  ctx.progress.note("warning: " + first +
                    (more > 0 ? " (" + std::to_string(more) + " more rings likewise)" : ""));
}

// Parsing resolved scheme: auto as if the CP policy applied; the driver has since decided. Where
// it does not apply the policy's points run the ring (the built-in rule), which every point can.
void RingAttentionSweep::settle_auto_points() {
  if (!p_.cp_policy) return;
  const CpPolicySource& source = p_.cp_policy->source;
  for (Point& pt : points_) {
    if (!pt.scheme_from_policy) continue;
    pt.scheme_source = source.description;
    if (source.policy) continue;
    pt.scheme = ring::Scheme::Ring;
    pt.ulysses_degree = 1;
    pt.scheme_from_policy = false;
    pt.label = point_label(p_, pt);
  }
}

SweepOutcome RingAttentionSweep::run(RunContext& ctx, h5::Group& out) {
  settle_auto_points();
  auto backend = ctx.paths.attention_backend({p_.kernel, p_.kernel_tile, policy_source().policy});
  write_attributes(out, *backend, ctx.progress);
  h5::PointsTable table = make_table(!backend->on_device());
  const std::vector<int> node_of = nodes_of_world(ctx);
  warn_spread_rings(ctx, node_of);
  // The ring communicators of this run, one set per ring size, freed when the run ends.
  std::function<NcclComm&()> world_nccl;
  if (ctx.gpu != nullptr) world_nccl = [&ctx]() -> NcclComm& { return ctx.gpu->world_nccl(); };
  ring::RingComms comms(ctx.world, node_of, p_.ring_order, world_nccl);
  out.attr("ring_comm_method", comms.method());
  std::vector<StepTable> steps = step_tables();
  SweepOutcome outcome;
  std::size_t pi = 0;
  for (; pi < points_.size(); ++pi) {
    const std::string where = "point " + std::to_string(pi) + " (" + points_[pi].label + ")";
    if (!ctx.progress.point_started(pi, points_[pi].label)) break;  // a signal: keep those before
    PhaseClock phases;
    const PointResult r = run_point(ctx, *backend, comms, pi, out, phases);
    record(table, pi, r);
    for (StepTable& st : steps) {
      const auto at = std::find(st.points.begin(), st.points.end(), pi);
      if (at != st.points.end())
        record_steps(st.table, static_cast<std::size_t>(at - st.points.begin()), r);
    }
    phases.lap(Phase::Write);
    record_phases(table, pi, phases);
    if (r.status == "oom") ctx.progress.note(where + ": out of memory, skipped");
    if (r.status != "parity_failed") continue;
    ctx.progress.note("PARITY FAILED at " + where + ": " + r.failure);
    if (outcome.ok) {
      outcome.ok = false;
      outcome.failure = where + ": " + r.failure;
    }
  }
  out.attr("ring_comm_creations", static_cast<std::int64_t>(comms.creations()));
  if (ctx.gpu != nullptr && ctx.gpu->has_world_nccl())
    out.attr("world_nccl_create_time_s", ctx.gpu->world_nccl().creation_seconds());
  table.keep_points(pi);
  for (StepTable& st : steps)  // each step table's rows of the sweep's points kept
    st.table.keep_points(static_cast<std::size_t>(
        std::lower_bound(st.points.begin(), st.points.end(), pi) - st.points.begin()));
  table.write(out);
  write_step_tables(out, steps);
  report_results(ctx, table, ring_headlines(), [&](const auto& r) {
    return ring_table(results_title(*this), r, ctx.progress.table_width());
  });
  return outcome;
}

PointResult RingAttentionSweep::run_point(RunContext& ctx, attn::AttentionBackend& backend,
                                          ring::RingComms& comms, std::size_t pi, h5::Group& out,
                                          PhaseClock& phases) const {
  const ring::Problem& prob = points_[pi].problem;
  PointResult r;
  const ring::RingComm& ring_comm = comms.get(prob.ring_size, r.comm_created);
  const ring::RingPlacement& place = ring_comm.placement;
  r.ring_id = place.ring_id;
  r.ring_rank = place.ring_rank;
  r.ring_nodes = place.nodes_spanned;
  r.crossing_hops = place.crossing_hops;
  r.comm_create_s = r.comm_created ? ring_comm.create_s : 0.0;
  r.kernel_path = backend.name();

  // Construction allocates every buffer: an out-of-memory on any rank skips the point on all.
  backend.reset_peak();
  std::unique_ptr<ring::RingTransport> transport;
  std::unique_ptr<ring::GroupTransport> group_transport;
  std::unique_ptr<ring::ContextParallelAttention> ra;
  const std::uint64_t seed = static_cast<std::uint64_t>(p_.seed);
  const int ring_rank = static_cast<int>(r.ring_rank);
  Shards in;
  try {
    ra = make_scheme(ctx, points_[pi], backend, ring_comm.mpi.get(), transport, group_transport, r);
    in = make_shards(prob, ring_rank, seed, p_.backward);
  } catch (const attn::OutOfMemory& e) {
    r.oom_message = e.what();
    r.oom_requested = static_cast<std::int64_t>(e.requested());
    r.oom_free = static_cast<std::int64_t>(e.free_bytes());
  } catch (const std::bad_alloc& e) {  // the host input shards (Q, K, V, dO of this rank)
    r.oom_requested = (p_.backward ? 4 : 3) * prob.shard_elements() *
                      static_cast<std::int64_t>(attn::dtype_size(prob.dtype));
    r.oom_free = static_cast<std::int64_t>(oom::meminfo_bytes("MemAvailable"));
    r.oom_message = "host input shards: out of memory allocating " +
                    std::to_string(r.oom_requested) + " B (" + std::to_string(r.oom_free) +
                    " B available; " + e.what() + ")";
  }
  if (on_any_rank(ctx.world, !r.oom_message.empty())) {
    r.status = "oom";
    phases.lap(Phase::Setup);
    return r;
  }

  ra->load_inputs(in.q.data(), in.k.data(), in.v.data(), p_.backward ? in.dO.data() : nullptr);
  phases.lap(Phase::Setup);
  backend.reset_block_calls();
  time_iterations(ctx.world, *ra, r, phases);
  r.block_calls = per_iteration(backend.block_calls(), p_.warmup + p_.iterations);
  for (const std::string& path : device_paths(!backend.on_device()))  // measured: none ran
    if (r.block_calls.of(path) == 0) r.block_calls.by_path.emplace_back(path, 0);
  r.peak_memory = static_cast<std::int64_t>(backend.peak_bytes());
  r.step_pairs = scheme_step_pairs(points_[pi], ring_rank);
  std::int64_t pairs = 0;
  for (auto x : r.step_pairs) pairs += x;
  r.forward_flop = 4.0 * prob.head_dim * static_cast<double>(pairs);

  // Parity on the last iteration's results.
  const ring::RingResult res = ra->result();
  check_point(ctx.world, ring_comm.mpi.get(), res, prob, r);
  phases.lap(Phase::Check);
  // The first point's tensors, so anyone can re-check the numbers offline.
  if (p_.dump && pi == 0) write_dump(out, prob, ring_rank, in, res, p_.backward);
  phases.lap(Phase::Write);
  // Last: it overwrites the results (every rank of the world runs it; rings of one skip it).
  r.overlap = ra->calibrate_overlap(ctx.world, p_.overlap_repeats);
  phases.lap(Phase::Calibration);
  return r;
}

void RingAttentionSweep::time_iterations(MPI_Comm world, ring::ContextParallelAttention& ra,
                                         PointResult& r, PhaseClock& phases) const {
  const std::size_t R = static_cast<std::size_t>(ra.problem().ring_size);
  std::vector<std::vector<double>> fc(R), fw(R), bc(R), bw(R);
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  for (std::int64_t it = 0; it < p_.warmup + p_.iterations; ++it) {
    if (it == p_.warmup) {
      ra.reset_bytes_sent();
      phases.lap(Phase::Warmup);
    }
    RB_MPI_CHECK(MPI_Barrier(world));
    const auto t0 = clock::now();
    ra.forward();  // ends synchronised
    const auto t1 = clock::now();
    if (p_.backward) ra.backward();
    const auto t2 = clock::now();
    if (it < p_.warmup) continue;
    r.forward_s.push_back(seconds(t0, t1));
    if (p_.backward) r.backward_s.push_back(seconds(t1, t2));
    r.total_s.push_back(seconds(t0, t2));
    for (std::size_t s = 0; s < R; ++s) {
      fc[s].push_back(ra.forward_steps().compute[s]);
      fw[s].push_back(ra.forward_steps().wait[s]);
      if (!p_.backward) continue;
      bc[s].push_back(ra.backward_steps().compute[s]);
      bw[s].push_back(ra.backward_steps().wait[s]);
    }
  }
  phases.lap(Phase::Timed);
  r.step_compute = medians(fc);
  r.step_wait = medians(fw);
  if (p_.backward) {
    r.backward_step_compute = medians(bc);
    r.backward_step_wait = medians(bw);
  }
  r.bytes_sent =
      static_cast<std::int64_t>(ra.bytes_sent() / static_cast<std::uint64_t>(p_.iterations));
}

// The ring's transport as the point asks (ring/transport_choice.hpp), hop by hop from each ring
// member's node (collective over the ring, as the probe is, so every rank decides alike);
// recorded with its reason, and per rank the transport of the hop into it. A copy_engine the
// ring cannot use is an error naming the key.
std::unique_ptr<ring::RingTransport> RingAttentionSweep::make_ring_transport(
    const RunContext& ctx, const Point& pt, attn::AttentionBackend& backend, MPI_Comm ring_comm,
    PointResult& r) const {
  int size = 1, rank = 0;
  MPI_Comm_size(ring_comm, &size);
  MPI_Comm_rank(ring_comm, &rank);
  std::vector<int> member_nodes(static_cast<std::size_t>(size));
  int mine = ctx.layout.node_index;
  RB_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, member_nodes.data(), 1, MPI_INT, ring_comm));
  ring::TransportFacts facts;
  facts.on_device = backend.on_device();
  ring::set_ring_nodes(facts, member_nodes, rank);
  if (ring::needs_copy_engine_probe(pt.transport, facts))
    facts.probe = ctx.paths.copy_engine_probe(ring_comm, facts.links.in_local);
  const ring::TransportDecision d = ring::decide_transport(pt.transport, facts);
  if (!d.error.empty())
    throw std::runtime_error("ring_attention point " + pt.label + ": " + d.error);
  r.transport = ring::hop_in_transport(d, facts.links);
  r.transport_reason = d.reason;
  if (d.kind == ring::RingTransportKind::CopyEngine)
    return ctx.paths.copy_engine_transport(ring_comm, backend, ring::HopLinks{});
  if (d.kind == ring::RingTransportKind::Mixed)
    return ctx.paths.copy_engine_transport(ring_comm, backend, facts.links);
  return ctx.paths.ring_transport(ring_comm, backend);
}

std::unique_ptr<ring::ContextParallelAttention> RingAttentionSweep::make_scheme(
    const RunContext& ctx, const Point& pt, attn::AttentionBackend& backend, MPI_Comm group,
    std::unique_ptr<ring::RingTransport>& ring_tr, std::unique_ptr<ring::GroupTransport>& group_tr,
    PointResult& r) const {
  if (pt.scheme == ring::Scheme::Ring) {
    ring_tr = make_ring_transport(ctx, pt, backend, group, r);
    return std::make_unique<ring::RingAttention>(pt.problem, backend, *ring_tr, p_.backward);
  }
  if (pt.scheme == ring::Scheme::Hybrid) {
    // Ulysses inside subgroups of U consecutive group ranks, the ring across them; both
    // transports keep a duplicate of their communicator, so the splits are freed here.
    int rank = 0;
    MPI_Comm_rank(group, &rank);
    const int u = pt.ulysses_degree;
    MPI_Comm heads = MPI_COMM_NULL, across = MPI_COMM_NULL;
    RB_MPI_CHECK(MPI_Comm_split(group, rank / u, rank % u, &heads));
    RB_MPI_CHECK(MPI_Comm_split(group, rank % u, rank / u, &across));
    group_tr = ctx.paths.group_transport(heads, backend);
    ring_tr = make_ring_transport(ctx, pt, backend, across, r);
    r.transport = ring_tr->name() + " ring, " + group_tr->name() + " all-to-all";
    MPI_Comm_free(&heads);
    MPI_Comm_free(&across);
    return std::make_unique<ring::HybridAttention>(pt.problem, u, backend, *ring_tr, *group_tr,
                                                   p_.backward);
  }
  // Ulysses' overlapped exchanges by the copy engines only where asked for (issue #27 measures
  // whether they should be the default).
  const bool copy_engines =
      pt.scheme == ring::Scheme::Ulysses && pt.transport == ring::TransportAsk::CopyEngine;
  group_tr = copy_engines ? ctx.paths.copy_engine_group_transport(group, backend)
                          : ctx.paths.group_transport(group, backend);
  r.transport = group_tr->name();
  r.transport_reason = copy_engines ? "transport copy_engine: Ulysses' head-group all-to-alls by "
                                      "the copy engines, the one-shot ones by NCCL"
                                    : "collectives: the " + group_tr->name() + " group transport";
  if (pt.scheme == ring::Scheme::AllGather)
    return std::make_unique<ring::AllGatherAttention>(pt.problem, backend, *group_tr, p_.backward);
  return std::make_unique<ring::UlyssesAttention>(pt.problem, backend, *group_tr, p_.backward,
                                                  pt.head_groups);
}

ring::ParityOptions RingAttentionSweep::parity_options() const {
  ring::ParityOptions opt;
  opt.sample_rows = p_.sample_rows;
  opt.mode = p_.parity_mode;
  return opt;
}

void RingAttentionSweep::check_point(MPI_Comm world, MPI_Comm ring_comm,
                                     const ring::RingResult& res, const ring::Problem& prob,
                                     PointResult& r) const {
  const ring::ParityOptions opt = parity_options();
  if (opt.mode == ring::ParityMode::Off) {
    r.parity.mode = ring::ParityMode::Off;
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  r.parity = ring::check_parity(prob, static_cast<std::uint64_t>(p_.seed),
                                static_cast<int>(r.ring_rank), ring_comm, res, p_.backward, opt);
  r.parity_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.failure = parity_verdict(world, r.parity, tolerance(prob));
  if (!r.failure.empty()) r.status = "parity_failed";
}

}  // namespace

std::unique_ptr<Sweep> parse_ring_attention(const SweepSpec& spec, const ParseContext& ctx) {
  ring_sweep::Parsed parsed = ring_sweep::parse(spec, ctx);
  return std::make_unique<RingAttentionSweep>(std::move(parsed.params), std::move(parsed.points));
}

}  // namespace rb
