#include "sweeps/ring_attention.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "host/host_kernels.hpp"
#include "ring/inputs.hpp"
#include "ring/problem.hpp"
#include "ring/reference.hpp"
#include "ring/ring_attention.hpp"

namespace rb {
namespace {

using ring::Layout;

struct RingParams {
  int batch = 1;
  int num_heads = 8;
  int head_dim = 64;
  std::vector<std::int64_t> seq_lengths;
  std::vector<std::int64_t> ring_sizes;
  std::vector<std::string> layouts;
  std::vector<std::string> dtypes;
  bool causal = false;
  std::vector<std::int64_t> segment_lengths, dilation_rates;
  std::int64_t warmup = 2;
  std::int64_t iterations = 5;
  bool backward = true;
  std::int64_t seed = 1234;
  std::string kernel = "auto";
  bool dump = false;
  int sample_rows = 32;
  double tolerance = 0.0;  // 0: the dtype's default
  int world_size = 1;
  Backend backend = Backend::Host;
};

struct Point {
  ring::Problem problem;
  int num_rings = 1;
  std::string label;
};

double default_tolerance(attn::DType t) {
  switch (t) {
    case attn::DType::F32: return 2e-4;
    case attn::DType::F16: return 5e-3;
    case attn::DType::BF16: return 2e-2;
  }
  return 2e-4;
}

std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<double> as_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<double> shard_as_doubles(const std::vector<unsigned char>& bytes, const ring::Problem& p) {
  std::vector<double> out(static_cast<std::size_t>(p.shard_elements()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    float f = 0;
    if (p.dtype == attn::DType::F32) {
      std::memcpy(&f, bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t h = 0;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      f = p.dtype == attn::DType::BF16 ? attn::bf16_to_float(h) : attn::half_to_float(h);
    }
    out[i] = f;
  }
  return out;
}

class RingAttentionSweep final : public Sweep {
 public:
  RingAttentionSweep(RingParams p, std::vector<Point> points)
      : p_(std::move(p)), points_(std::move(points)) {}
  std::string type() const override { return "ring_attention"; }

  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    for (const Point& pt : points_)
      lines.push_back(pt.label + ", " + std::to_string(p_.iterations) + " iterations (+" +
                      std::to_string(p_.warmup) + " warmup)");
    return lines;
  }

  std::uint64_t estimated_output_bytes() const override {
    std::uint64_t total = 4096;
    for (const Point& pt : points_) {
      const std::uint64_t per_rank = 8ull * (3ull * static_cast<std::uint64_t>(p_.iterations) +
                                             5ull * static_cast<std::uint64_t>(pt.problem.ring_size) + 40);
      total += per_rank * static_cast<std::uint64_t>(p_.world_size) + 2048;
    }
    if (p_.dump && !points_.empty())
      total += 8ull * 8 * static_cast<std::uint64_t>(points_[0].problem.shard_elements()) *
               static_cast<std::uint64_t>(p_.world_size);
    return total;
  }

  SweepOutcome run(RunContext& ctx, h5::Group& out) override;

 private:
  RingParams p_;
  std::vector<Point> points_;
};

struct Stats3 {
  double median, min, max;
};
Stats3 stats_of(const std::vector<double>& v) {
  if (v.empty()) return {NAN, NAN, NAN};
  return {median_of(v), *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

SweepOutcome RingAttentionSweep::run(RunContext& ctx, h5::Group& out) {
  const int rank = ctx.layout.rank;
  SweepOutcome outcome;
  auto backend = ctx.paths.attention_backend({p_.kernel, "default"});
  const bool host = !backend->on_device();
  ProgressReporter& progress = ctx.progress;

  out.attr("batch", static_cast<std::int64_t>(p_.batch));
  out.attr("num_heads", static_cast<std::int64_t>(p_.num_heads));
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
  out.attr("attention_backend", backend->name());
  out.attr("transport", host ? "mpi" : "nccl");
  out.attr("flop_convention",
           "FlashAttention: forward 4*d per attending (query, key) pair actually computed "
           "(summed over batch, heads and dilation branches; masked pairs not counted); "
           "backward 2.5x forward");
  if (host) {
    std::string stored;
    for (const auto& d : p_.dtypes) stored += (stored.empty() ? "" : ", ") + d;
    const std::string note = "host path: Q/K/V/dO stored as " + stored +
                             ", converted to fp32 for compute; outputs, log-sum-exp and "
                             "gradient accumulators fp32";
    out.attr("precision_note", note);
    progress.note(note);
  }

  const std::size_t P = points_.size();
  std::vector<std::string> status(P, "ok");
  const std::size_t iters = static_cast<std::size_t>(p_.iterations);

  for (std::size_t pi = 0; pi < P; ++pi) {
    const Point& pt = points_[pi];
    const ring::Problem& prob = pt.problem;
    const int R = prob.ring_size;
    progress.point_started(pi, pt.label);
    char gname[32];
    std::snprintf(gname, sizeof gname, "point_%04zu", pi);
    h5::Group g = out.group(gname);
    const int ring_id = rank / R, ring_rank = rank % R;
    Comm ring_comm;
    {
      MPI_Comm c = MPI_COMM_NULL;
      RB_MPI_CHECK(MPI_Comm_split(ctx.world, ring_id, ring_rank, &c));
      ring_comm = Comm(c);
    }
    const double tol = p_.tolerance > 0 ? p_.tolerance : default_tolerance(prob.dtype);
    g.attr("label", pt.label);
    g.attr("seq_len", prob.seq_len);
    g.attr("ring_size", static_cast<std::int64_t>(R));
    g.attr("num_rings", static_cast<std::int64_t>(pt.num_rings));
    g.attr("layout", ring::to_string(prob.layout));
    g.attr("causal", static_cast<std::int64_t>(prob.causal));
    g.attr("storage_dtype", ring::to_string(prob.dtype));
    g.attr("compute_dtype", host ? "fp32" : ring::to_string(prob.dtype));
    g.attr("tolerance", tol);
    g.write_per_rank("ring_id", static_cast<std::int64_t>(ring_id),
                     {"1", "which ring this rank belongs to (world rank / ring size)"});
    g.write_per_rank("ring_rank", static_cast<std::int64_t>(ring_rank),
                     {"1", "this rank's position in its ring (world rank % ring size)"});

    // Construction allocates every buffer: an out-of-memory on any rank skips the point on all.
    backend->reset_peak();
    std::unique_ptr<ring::RingTransport> transport;
    std::unique_ptr<ring::RingAttention> ra;
    std::string oom_message;
    std::int64_t oom_requested = 0;
    try {
      transport = ctx.paths.ring_transport(ring_comm.get(), *backend);
      ra = std::make_unique<ring::RingAttention>(prob, *backend, *transport, p_.backward);
    } catch (const attn::OutOfMemory& e) {
      oom_message = e.what();
      oom_requested = static_cast<std::int64_t>(e.requested());
    }
    int local_oom = oom_message.empty() ? 0 : 1, any_oom = 0;
    RB_MPI_CHECK(MPI_Allreduce(&local_oom, &any_oom, 1, MPI_INT, MPI_MAX, ctx.world));
    if (any_oom) {
      ra.reset();
      transport.reset();
      status[pi] = "oom";
      g.attr("status", "oom");
      g.write_per_rank("oom_requested_bytes", oom_requested,
                       {"B", "allocation that failed on this rank (0: this rank did not run out)"});
      g.write_per_rank_string("oom_message", oom_message,
                              {"1", "the allocation failure on this rank (empty if none)"});
      progress.note("point " + std::to_string(pi) + " (" + pt.label + "): out of memory, skipped");
      continue;
    }

    using ring::Tensor;
    const std::uint64_t seed = static_cast<std::uint64_t>(p_.seed);
    const auto q = ring::make_shard(prob, ring_rank, seed, Tensor::Q);
    const auto k = ring::make_shard(prob, ring_rank, seed, Tensor::K);
    const auto v = ring::make_shard(prob, ring_rank, seed, Tensor::V);
    std::vector<unsigned char> dO;
    if (p_.backward) dO = ring::make_shard(prob, ring_rank, seed, Tensor::dO);
    ra->load_inputs(q.data(), k.data(), v.data(), p_.backward ? dO.data() : nullptr);

    std::vector<double> fwd_t, bwd_t, tot_t;
    std::vector<std::vector<double>> fc(static_cast<std::size_t>(R)), fw(fc.size()), bc(fc.size()), bw(fc.size());
    const std::int64_t total_iters = p_.warmup + p_.iterations;
    for (std::int64_t it = 0; it < total_iters; ++it) {
      if (it == p_.warmup) ra->reset_bytes_sent();
      RB_MPI_CHECK(MPI_Barrier(ctx.world));
      const auto t0 = std::chrono::steady_clock::now();
      ra->forward();  // ends synchronised
      const auto t1 = std::chrono::steady_clock::now();
      if (p_.backward) ra->backward();
      const auto t2 = std::chrono::steady_clock::now();
      if (it < p_.warmup) continue;
      fwd_t.push_back(std::chrono::duration<double>(t1 - t0).count());
      if (p_.backward) bwd_t.push_back(std::chrono::duration<double>(t2 - t1).count());
      tot_t.push_back(std::chrono::duration<double>(t2 - t0).count());
      for (int s = 0; s < R; ++s) {
        const std::size_t i = static_cast<std::size_t>(s);
        fc[i].push_back(ra->forward_steps().compute[i]);
        fw[i].push_back(ra->forward_steps().wait[i]);
        if (p_.backward) {
          bc[i].push_back(ra->backward_steps().compute[i]);
          bw[i].push_back(ra->backward_steps().wait[i]);
        }
      }
    }
    const std::int64_t bytes_per_iter =
        static_cast<std::int64_t>(ra->bytes_sent() / static_cast<std::uint64_t>(p_.iterations));

    // Parity on the last iteration's results.
    ring::RingResult res;
    const std::size_t n = static_cast<std::size_t>(prob.shard_elements());
    res.out.resize(n);
    res.lse.resize(static_cast<std::size_t>(prob.batch) * prob.heads * static_cast<std::size_t>(prob.local_rows()));
    ra->read_output(res.out.data(), res.lse.data());
    if (p_.backward) {
      res.dq.resize(n);
      res.dk.resize(n);
      res.dv.resize(n);
      ra->read_gradients(res.dq.data(), res.dk.data(), res.dv.data());
    }
    ring::ParityOptions popt;
    popt.sample_rows = p_.sample_rows;
    const auto parity_start = std::chrono::steady_clock::now();
    const ring::ParityReport par =
        ring::check_parity(prob, seed, ring_rank, ring_comm.get(), res, p_.backward, popt);
    const double parity_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - parity_start).count();

    // Metrics.
    const std::vector<std::int64_t> pairs = ring::step_pairs(prob, ring_rank);
    std::int64_t pairs_total = 0;
    for (auto x : pairs) pairs_total += x;
    const double flops_fwd = 4.0 * prob.head_dim * static_cast<double>(pairs_total);
    const double flops_bwd = p_.backward ? 2.5 * flops_fwd : 0.0;
    const Stats3 sf = stats_of(fwd_t), sb = stats_of(bwd_t), st = stats_of(tot_t);
    auto per_s = [](double x, double t) { return t > 0 ? x / t : NAN; };
    const double tokens = static_cast<double>(prob.batch) * static_cast<double>(prob.local_rows());

    const std::uint64_t I = iters, Rd = static_cast<std::uint64_t>(R);
    g.write_per_rank("forward_time", fwd_t, {I}, {"s", "wall time of each timed forward pass (after a world barrier)"});
    g.write_per_rank("forward_time_median", sf.median, {"s", "median of forward_time"});
    g.write_per_rank("forward_time_min", sf.min, {"s", "minimum of forward_time"});
    g.write_per_rank("forward_time_max", sf.max, {"s", "maximum of forward_time"});
    if (p_.backward) {
      g.write_per_rank("backward_time", bwd_t, {I}, {"s", "wall time of each timed backward pass"});
      g.write_per_rank("backward_time_median", sb.median, {"s", "median of backward_time"});
      g.write_per_rank("backward_time_min", sb.min, {"s", "minimum of backward_time"});
      g.write_per_rank("backward_time_max", sb.max, {"s", "maximum of backward_time"});
    }
    g.write_per_rank("total_time", tot_t, {I}, {"s", "forward plus backward wall time of each timed iteration"});
    g.write_per_rank("total_time_median", st.median, {"s", "median of total_time"});
    g.write_per_rank("total_time_min", st.min, {"s", "minimum of total_time"});
    g.write_per_rank("total_time_max", st.max, {"s", "maximum of total_time"});
    auto medians = [](const std::vector<std::vector<double>>& v) {
      std::vector<double> m;
      for (const auto& x : v) m.push_back(median_of(x));
      return m;
    };
    g.write_per_rank("step_compute_time", medians(fc), {Rd},
                     {"s", "forward: median over iterations of each ring step's block-kernel time"});
    g.write_per_rank("step_wait_time", medians(fw), {Rd},
                     {"s", "forward: median over iterations of each ring step's exposed communication (time blocked waiting for the next K/V block)"});
    if (p_.backward) {
      g.write_per_rank("backward_step_compute_time", medians(bc), {Rd},
                       {"s", "backward: median over iterations of each ring step's kernel time (incl. adding dK/dV partial sums)"});
      g.write_per_rank("backward_step_wait_time", medians(bw), {Rd},
                       {"s", "backward: median over iterations of each ring step's exposed communication; the last step includes the final dK/dV hop home"});
    }
    g.write_per_rank("step_pairs", pairs, {Rd},
                     {"1", "attending (query, key) pairs computed at each ring step, summed over batch, heads and branches (imbalance across ranks shows here)"});
    g.write_per_rank("bytes_sent", bytes_per_iter, {"B", "bytes this rank sent to its ring neighbour per iteration (forward + backward)"});
    g.write_per_rank("peak_memory_bytes", static_cast<std::int64_t>(backend->peak_bytes()),
                     {"B", "high-water mark of the attention backend's allocations during the point"});
    g.write_per_rank("tokens_per_s", per_s(tokens, st.median),
                     {"1/s", "tokens of this rank's shard (batch x local rows) per median iteration time; sum over a ring's ranks for the ring"});
    g.write_per_rank("flops_forward", flops_fwd, {"1", "forward FLOPs of this rank per iteration (FlashAttention convention, unmasked pairs only)"});
    g.write_per_rank("tflops_fwd", per_s(flops_fwd, sf.median) / 1e12, {"TFLOP/s", "flops_forward / forward_time_median"});
    if (p_.backward)
      g.write_per_rank("tflops_bwd", per_s(flops_bwd, sb.median) / 1e12, {"TFLOP/s", "2.5 x flops_forward / backward_time_median"});
    g.write_per_rank("tflops_total", per_s(flops_fwd + flops_bwd, st.median) / 1e12,
                     {"TFLOP/s", "(forward + backward FLOPs) / total_time_median"});
    auto err = [&](const char* name, double value, const char* what) {
      g.write_per_rank(name, value, {"1", what});
    };
    err("out_max_abs", par.out.max_abs, "max |O - O_ref| over this rank's checked elements");
    err("out_max_rel", par.out.max_rel, "out_max_abs / max |O_ref| over the same elements");
    err("lse_max_abs", par.lse.max_abs, "max |lse - lse_ref| (natural log) over this rank's checked query rows");
    if (p_.backward) {
      err("dq_max_abs", par.dq.max_abs, "max |dQ - dQ_ref| over this rank's checked elements");
      err("dq_max_rel", par.dq.max_rel, "dq_max_abs / max |dQ_ref|");
      err("dk_max_abs", par.dk.max_abs, "max |dK - dK_ref| over this rank's checked elements");
      err("dk_max_rel", par.dk.max_rel, "dk_max_abs / max |dK_ref|");
      err("dv_max_abs", par.dv.max_abs, "max |dV - dV_ref| over this rank's checked elements");
      err("dv_max_rel", par.dv.max_rel, "dv_max_abs / max |dV_ref|");
    }
    g.write_per_rank("parity_time", parity_seconds,
                     {"s", "host time of this rank's reference computation and comparison (not part of any timed region)"});
    g.write_per_rank("parity_elements",
                     std::vector<std::int64_t>{par.out.compared, par.dq.compared, par.dk.compared, par.dv.compared},
                     {4}, {"1", "elements compared with the reference for O, dQ, dK, dV"});

    // Verdict: the worst relative error over the world (every ring) against the tolerance.
    const double mine[4] = {par.out.max_rel, par.dq.max_rel, par.dk.max_rel, par.dv.max_rel};
    double local[4], worst[4];
    for (int i = 0; i < 4; ++i) local[i] = std::isnan(mine[i]) ? -1.0 : mine[i];
    RB_MPI_CHECK(MPI_Allreduce(local, worst, 4, MPI_DOUBLE, MPI_MAX, ctx.world));
    const char* names[4] = {"out", "dq", "dk", "dv"};
    std::string why;
    for (int i = 0; i < 4; ++i)
      if (worst[i] > tol && why.empty())
        why = std::string(names[i]) + " max rel error " + fmt(worst[i]) + " > tolerance " + fmt(tol);
    g.attr("parity_sampled", static_cast<std::int64_t>(par.sampled));
    g.attr("parity_note", par.note.empty() ? std::string("every element of every head checked") : par.note);
    if (!why.empty()) {
      status[pi] = "parity_failed";
      if (outcome.ok) {
        outcome.ok = false;
        outcome.failure = "point " + std::to_string(pi) + " (" + pt.label + "): " + why;
      }
      progress.note("PARITY FAILED at point " + std::to_string(pi) + " (" + pt.label + "): " + why);
    }
    g.attr("status", status[pi]);

    if (p_.dump && pi == 0) {
      // The first point's tensors, so anyone can re-check the numbers offline.
      h5::Group d = out.group("dump");
      d.attr("point", "point_0000");
      d.attr("layout", "per rank [world, batch, heads, local_rows, head_dim]; row i of a rank holds global position positions[rank, i]");
      const std::vector<std::uint64_t> dims = {static_cast<std::uint64_t>(prob.batch),
                                               static_cast<std::uint64_t>(prob.heads),
                                               static_cast<std::uint64_t>(prob.local_rows()),
                                               static_cast<std::uint64_t>(prob.head_dim)};
      const std::vector<std::uint64_t> rows = {dims[0], dims[1], dims[2]};
      d.write_per_rank("positions", ring::local_positions(prob, ring_rank), {dims[2]},
                       {"1", "global sequence position of each local row"});
      d.write_per_rank("q", shard_as_doubles(q, prob), dims, {"1", "queries as stored (storage dtype values)"});
      d.write_per_rank("k", shard_as_doubles(k, prob), dims, {"1", "keys as stored"});
      d.write_per_rank("v", shard_as_doubles(v, prob), dims, {"1", "values as stored"});
      d.write_per_rank("o", as_doubles(res.out), dims, {"1", "ring attention output (fp32)"});
      d.write_per_rank("lse", as_doubles(res.lse), rows, {"1", "log-sum-exp (natural log) of each query row"});
      if (p_.backward) {
        d.write_per_rank("do", shard_as_doubles(dO, prob), dims, {"1", "output gradient as stored"});
        d.write_per_rank("dq", as_doubles(res.dq), dims, {"1", "query gradient (fp32)"});
        d.write_per_rank("dk", as_doubles(res.dk), dims, {"1", "key gradient (fp32), on the block's owner"});
        d.write_per_rank("dv", as_doubles(res.dv), dims, {"1", "value gradient (fp32), on the block's owner"});
      }
    }
  }

  // The table of points, one row each, for analysis scripts.
  h5::Group t = out.group("points");
  std::vector<std::int64_t> seq, rs, nr, causal;
  std::vector<std::string> layout, dtype;
  for (const Point& pt : points_) {
    seq.push_back(pt.problem.seq_len);
    rs.push_back(pt.problem.ring_size);
    nr.push_back(pt.num_rings);
    causal.push_back(pt.problem.causal);
    layout.push_back(ring::to_string(pt.problem.layout));
    dtype.push_back(ring::to_string(pt.problem.dtype));
  }
  const std::vector<std::uint64_t> pd = {static_cast<std::uint64_t>(P)};
  t.write_shared("seq_len", seq, pd, {"1", "total sequence length S of each point"});
  t.write_shared("ring_size", rs, pd, {"1", "ranks per ring R"});
  t.write_shared("num_rings", nr, pd, {"1", "concurrent rings (world / R)"});
  t.write_shared("causal", causal, pd, {"1", "1 if causal masking"});
  t.write_shared_strings("layout", layout, {"1", "sequence layout over the ring"});
  t.write_shared_strings("dtype", dtype, {"1", "storage dtype of Q, K, V, dO"});
  t.write_shared_strings("status", status, {"1", "ok | oom | parity_failed"});
  t.write_shared_strings("group", [&] {
    std::vector<std::string> names;
    char b[32];
    for (std::size_t i = 0; i < P; ++i) {
      std::snprintf(b, sizeof b, "point_%04zu", i);
      names.push_back(b);
    }
    return names;
  }(), {"1", "subgroup holding the point's per-rank datasets"});
  return outcome;
}

}  // namespace

std::unique_ptr<Sweep> parse_ring_attention(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::Node& n = spec.node;
  n.allow_only({"type", "name", "batch", "seq_lengths", "num_heads", "head_dim", "embed_dim",
                "dtype", "causal", "layout", "segment_lengths", "dilation_rates", "ring_sizes",
                "warmup", "iterations", "backward", "seed", "kernel", "validate"});
  RingParams p;
  p.world_size = ctx.world_size;
  p.backend = ctx.backend;
  p.batch = static_cast<int>(n.get_int("batch", 1, 1, 1 << 20));
  if (!n.has("seq_lengths")) n.fail("seq_lengths", "required: the total sequence lengths to sweep, e.g. [4096, 16384]");
  p.seq_lengths = n.get_int_list("seq_lengths", {}, 1, std::int64_t{1} << 40);
  p.num_heads = static_cast<int>(n.get_int("num_heads", 8, 1, 1 << 16));
  if (n.has("embed_dim")) {
    const std::int64_t e = n.get_int("embed_dim", 0, 1, 1 << 24);
    if (e % p.num_heads != 0)
      n.fail("embed_dim", "embed_dim " + std::to_string(e) + " is not divisible by num_heads " +
                              std::to_string(p.num_heads) + " (" + std::to_string(e) + " % " +
                              std::to_string(p.num_heads) + " = " + std::to_string(e % p.num_heads) + ")");
    p.head_dim = static_cast<int>(e / p.num_heads);
    if (n.has("head_dim") && n.get_int("head_dim", 0) != p.head_dim)
      n.fail("head_dim", "head_dim " + std::to_string(n.get_int("head_dim", 0)) +
                             " contradicts embed_dim / num_heads = " + std::to_string(e) + " / " +
                             std::to_string(p.num_heads) + " = " + std::to_string(p.head_dim));
  } else {
    p.head_dim = static_cast<int>(n.get_int("head_dim", 64, 1, 1024));
  }
  p.kernel = n.get_choice("kernel", "auto", {"auto", "flash", "cudnn", "naive"});
#ifndef RINGBENCH_HAVE_CUDNN
  if (ctx.backend == Backend::Cuda && p.kernel == "cudnn")
    n.fail("kernel", "kernel 'cudnn' needs a build with cuDNN and this one has none (CMake did not "
                     "find cudnn.h and libcudnn: set CUDNN_ROOT, rebuild with "
                     "-DRINGBENCH_ENABLE_CUDNN=ON); use flash, naive or auto");
#endif
  if (ctx.backend != Backend::Cuda) {
    if (p.kernel != "auto")
      n.fail("kernel", "kernel '" + p.kernel + "' is a GPU kernel; the host path has one kernel "
                       "(Kokkos): leave kernel out or set it to auto");
    if (p.head_dim > attn::host::kMaxHeadDim)
      n.fail(n.has("embed_dim") ? "embed_dim" : "head_dim",
             "head_dim " + std::to_string(p.head_dim) + " exceeds the host kernels' maximum " +
                 std::to_string(attn::host::kMaxHeadDim));
  }
  p.causal = n.get_bool("causal", false);
  p.layouts = n.get_choice_list("layout", {p.causal ? "zigzag" : "contiguous"},
                                {"contiguous", "zigzag", "striped"});
  p.dtypes = n.get_choice_list("dtype", {ctx.backend == Backend::Cuda ? "bf16" : "fp32"},
                               {"fp32", "fp16", "bf16"});
  p.segment_lengths = n.get_int_list("segment_lengths", {}, 1);
  p.dilation_rates = n.get_int_list("dilation_rates", {}, 1);
  if (p.segment_lengths.size() != p.dilation_rates.size()) {
    const bool seg = p.segment_lengths.size() < p.dilation_rates.size();
    n.fail(seg ? "segment_lengths" : "dilation_rates",
           "segment_lengths has " + std::to_string(p.segment_lengths.size()) +
               " entries and dilation_rates " + std::to_string(p.dilation_rates.size()) +
               ": one dilation rate per segment length");
  }
  for (std::size_t i = 0; i < p.segment_lengths.size(); ++i) {
    const auto w = p.segment_lengths[i], r = p.dilation_rates[i];
    if (r > w)
      n.fail("dilation_rates", "dilation rate " + std::to_string(r) + " (entry " + std::to_string(i) +
                                   ") is larger than its segment length " + std::to_string(w));
    if (w % r != 0)
      n.fail("segment_lengths", "segment length " + std::to_string(w) + " (entry " + std::to_string(i) +
                                    ") is not divisible by its dilation rate " + std::to_string(r) +
                                    ": " + std::to_string(w) + " % " + std::to_string(r) + " = " +
                                    std::to_string(w % r));
  }
  // `powers_of_two` lets one file serve a 1-, 2-, 4- or 8-GPU node: the scaling series is
  // whatever this world allows, rather than a list that fails on smaller allocations.
  if (n.has("ring_sizes") && n.child("ring_sizes").yaml().IsScalar() &&
      n.child("ring_sizes").yaml().Scalar() == "powers_of_two") {
    for (std::int64_t R = 1; R <= ctx.world_size && ctx.world_size % R == 0; R *= 2) p.ring_sizes.push_back(R);
    if (p.ring_sizes.back() != ctx.world_size) p.ring_sizes.push_back(ctx.world_size);
  } else {
    p.ring_sizes = n.get_int_list("ring_sizes", {ctx.world_size}, 1, 1 << 20);
  }
  for (auto R : p.ring_sizes)
    if (R > ctx.world_size || ctx.world_size % R != 0)
      n.fail("ring_sizes", "ring size " + std::to_string(R) + " does not divide the world size " +
                               std::to_string(ctx.world_size) + " (" + std::to_string(ctx.world_size) +
                               " % " + std::to_string(R) + " = " +
                               std::to_string(ctx.world_size % R) +
                               "): the world splits into world / ring size concurrent rings");
  p.warmup = n.get_int("warmup", p.warmup, 0, 1000000);
  p.iterations = n.get_int("iterations", p.iterations, 1, 1000000);
  p.backward = n.get_bool("backward", true);
  p.seed = n.get_int("seed", p.seed, 0);
  if (n.has("validate")) {
    const cfg::Node v = n.child("validate");
    v.require_map();
    v.allow_only({"dump", "sample_rows", "tolerance"});
    p.dump = v.get_bool("dump", false);
    p.sample_rows = static_cast<int>(v.get_int("sample_rows", 32, 2, 1 << 20));
    p.tolerance = v.get_double("tolerance", 0.0, 0.0, 1.0);
  }

  std::vector<Point> points;
  for (auto S : p.seq_lengths)
    for (auto R : p.ring_sizes)
      for (const auto& lay : p.layouts)
        for (const auto& dt : p.dtypes) {
          Point pt;
          ring::Problem& pr = pt.problem;
          pr.batch = p.batch;
          pr.heads = p.num_heads;
          pr.head_dim = p.head_dim;
          pr.seq_len = S;
          pr.ring_size = static_cast<int>(R);
          pr.layout = ring::layout_from_string(lay);
          pr.causal = p.causal;
          pr.dtype = ring::dtype_from_string(dt);
          for (std::size_t i = 0; i < p.segment_lengths.size(); ++i)
            pr.branches.push_back({p.segment_lengths[i], p.dilation_rates[i]});
          const std::string e = ring::problem_error(pr);
          if (!e.empty()) {
            const bool seg = e.rfind("branch", 0) == 0 && e.find("sequence length") == std::string::npos &&
                             e.find("longer than") == std::string::npos;
            n.fail(seg ? "segment_lengths" : "seq_lengths",
                   "point S=" + std::to_string(S) + ", ring size " + std::to_string(R) + ", layout " +
                       lay + ": " + e);
          }
          pt.num_rings = static_cast<int>(ctx.world_size / R);
          pt.label = "S=" + std::to_string(S) + " R=" + std::to_string(R) + " (" +
                     std::to_string(pt.num_rings) + (pt.num_rings == 1 ? " ring" : " rings") + ") " +
                     (p.causal ? "causal " : "") + lay + " " + dt + " b=" + std::to_string(p.batch) +
                     " h=" + std::to_string(p.num_heads) + " d=" + std::to_string(p.head_dim) +
                     (p.segment_lengths.empty() ? "" : " dilated") + (p.backward ? " fwd+bwd" : " fwd");
          points.push_back(std::move(pt));
        }
  return std::make_unique<RingAttentionSweep>(std::move(p), std::move(points));
}

}  // namespace rb
