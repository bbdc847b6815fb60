#include "sweeps/kernel_tuning.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>
#include <utility>

#include "kernel_paths.hpp"
#include "metrics/table.hpp"
#include "ring/inputs.hpp"
#include "ring/problem.hpp"
#include "ring/parity.hpp"
#include "ring/ring_attention.hpp"

namespace rb {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One dilation choice of the grid; segment 0 means exact attention ("none").
struct Dilation {
  std::int64_t segment = 0, rate = 0;
};

struct TuningParams {
  int batch = 0;
  int num_heads = 0;
  std::vector<std::int64_t> block_rows, head_dims;
  std::vector<std::string> dtypes;
  std::vector<bool> causal;
  std::vector<Dilation> dilations;
  std::int64_t warmup = 0;  // as parsed: a key left out is its default in kernel_tuning_keys()
  std::int64_t iterations = 0;
  std::int64_t seed = 0;
  int sample_rows = 0;
  double tolerance = 0.0;  // 0: the dtype's default
  int world_size = 1;      // metrics are [world, P, ...]
};

// One shape on one kernel path.
struct Point {
  ring::Problem problem;
  Dilation dilation;
  std::string path;
  std::string auto_path;  // what the built-in `auto` rule runs on this shape
  std::string label;
};

// What this rank measured at one point.
struct PointResult {
  std::string status = "ok";  // ok | oom | parity_failed (this rank's own verdict)
  std::string kernel_path;
  std::string failure;
  std::vector<double> forward_s, backward_s;
  std::vector<double> forward_kernel_s, backward_kernel_s;
  double max_rel = kNaN;
};

const char* const kMarginNote =
    "pick a path only where it beats the incumbent by a margin larger than the spread of the "
    "samples (see analysis tuning: margin, parity and hysteresis); times here are raw samples";

class KernelTuningSweep final : public Sweep {
 public:
  KernelTuningSweep(TuningParams p, std::vector<Point> points)
      : p_(std::move(p)), points_(std::move(points)) {}
  std::string type() const override { return "kernel_tuning"; }
  std::size_t point_count() const override { return points_.size(); }
  std::string iterations_text() const override {
    return rb::iterations_text(p_.iterations, p_.warmup);
  }
  // Each point: one block of rows x rows forward and backward (3.5x the forward's 4 d per
  // pair, half when causal) at the device rate, plus the per-point set-up and parity check.
  double estimated_seconds(const CostAssumptions& a) const override {
    double total = 0;
    for (const Point& pt : points_) {
      const ring::Problem& pr = pt.problem;
      const double rows = static_cast<double>(pr.seq_len);
      const double flop =
          3.5 * 4.0 * pr.batch * pr.heads * pr.head_dim * rows * rows * (pr.causal ? 0.5 : 1.0);
      const double rate = a.attention_flops(pt.path);
      const double inputs = 2.0 * static_cast<double>(pr.shard_elements() + pr.kv_shard_elements());
      total += static_cast<double>(p_.iterations + p_.warmup) * flop / rate + a.point_overhead_s +
               a.setup_per_value_s * inputs;
    }
    return total;
  }

  std::vector<std::string> plan() const override {
    return timed_plan(points_, p_.iterations, p_.warmup);
  }

  // The table as write() lays it out (every dataset counted).
  std::uint64_t estimated_output_bytes() const override {
    return make_table().planned_bytes(static_cast<std::size_t>(p_.world_size));
  }

  SweepOutcome run(RunContext& ctx, h5::Group& out) override;

 private:
  double tolerance(const ring::Problem& prob) const {
    return ring::tolerance_for(prob.dtype, p_.tolerance);
  }
  void write_attributes(h5::Group& out) const;
  h5::PointsTable make_table() const;
  PointResult run_point(RunContext& ctx, attn::AttentionBackend& backend, const Point& pt) const;
  void time_iterations(ring::RingAttention& ra, PointResult& r) const;

  TuningParams p_;
  std::vector<Point> points_;
};

void KernelTuningSweep::write_attributes(h5::Group& out) const {
  std::vector<std::int64_t> causal, segments, rates;
  for (bool c : p_.causal) causal.push_back(c ? 1 : 0);
  for (const Dilation& d : p_.dilations) {
    segments.push_back(d.segment);
    rates.push_back(d.rate);
  }
  out.attr("batch", static_cast<std::int64_t>(p_.batch));
  out.attr("num_heads", static_cast<std::int64_t>(p_.num_heads));
  out.attr("block_rows", p_.block_rows);
  out.attr("head_dims", p_.head_dims);
  out.attr("dtypes", cfg::join(p_.dtypes, ", "));
  out.attr("causal", causal);
  out.attr("segment_lengths", segments);
  out.attr("dilation_rates", rates);
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.attr("seed", p_.seed);
  out.attr("margin_note", kMarginNote);
}

h5::PointsTable KernelTuningSweep::make_table() const {
  h5::PointsTable t(points_.size());
  std::vector<std::int64_t> rows, hd, causal, seg, rate;
  std::vector<std::string> dtype, path, auto_path, label;
  std::vector<double> tol;
  for (const Point& pt : points_) {
    rows.push_back(pt.problem.seq_len);
    hd.push_back(pt.problem.head_dim);
    dtype.push_back(ring::to_string(pt.problem.dtype));
    causal.push_back(pt.problem.causal ? 1 : 0);
    seg.push_back(pt.dilation.segment);
    rate.push_back(pt.dilation.rate);
    path.push_back(pt.path);
    auto_path.push_back(pt.auto_path);
    label.push_back(pt.label);
    tol.push_back(tolerance(pt.problem));
  }
  t.key("block_rows", std::move(rows),
        {"1", "query and key rows of the block (the whole sequence at ring size 1)"});
  t.key("head_dim", std::move(hd), {"1", "head dimension d"});
  t.key("dtype", std::move(dtype), {"1", "storage dtype of Q, K, V, dO"});
  t.key("causal", std::move(causal), {"1", "1: causal mask, 0: none"});
  t.key("segment", std::move(seg), {"1", "LongNet segment length (0: no dilation)"});
  t.key("rate", std::move(rate), {"1", "LongNet dilation rate (0: no dilation)"});
  t.key("path", std::move(path), {"1", "kernel path of the kernel path table that ran the point"});
  t.key(
      "auto_path", std::move(auto_path),
      {"1", "the path the built-in `auto` rule runs on this shape (what a tuned policy replaces)"});
  t.key("label", std::move(label), {"1", "the point's plan line"});
  t.key("tolerance", std::move(tol),
        {"1", "largest max_rel_error before the point is parity_failed"});
  const std::uint64_t I = static_cast<std::uint64_t>(p_.iterations);
  t.text_metric("status", {"1", "ok | oom | parity_failed (this rank's own verdict)"});
  t.text_metric("kernel_path", {"1", "the backend's name for the path that ran"});
  t.metric("forward_time_s", {"s", "wall time of each timed forward pass"}, {I}, {"iteration"});
  t.metric("backward_time_s", {"s", "wall time of each timed backward pass"}, {I}, {"iteration"});
  // The block kernels alone, between the backend's timing marks (CUDA events on the GPU): what
  // the paths differ in. The wall times above add the per-pass set-up the ring program also
  // pays (output init, delta, cuDNN's O copy), and are what `rb-analysis tune` compares.
  t.metric("forward_kernel_time_s",
           {"s", "block-kernel time of each timed forward pass (CUDA events on the GPU)"}, {I});
  t.metric("backward_kernel_time_s",
           {"s", "block-kernel time of each timed backward pass (CUDA events on the GPU)"}, {I});
  t.metric("max_rel_error", {"1", "largest relative error of O, dQ, dK, dV against the reference"});
  t.int_metric("parity_ok", {"1", "1: max_rel_error within tolerance, 0: not (-1: not checked)"});
  h5::Judging j;
  j.headline = {"forward_time_s", "backward_time_s"};
  j.noise = "compute";
  j.each_rank = true;  // every rank times its own device alone (the tuning pools them)
  t.judging(std::move(j));
  return t;
}

void record(h5::PointsTable& t, std::size_t pi, const PointResult& r) {
  t.set_text("status", pi, r.status);
  t.set_text("kernel_path", pi, r.kernel_path);
  if (r.status == "oom") return;
  t.set("forward_time_s", pi, r.forward_s);
  t.set("backward_time_s", pi, r.backward_s);
  t.set("forward_kernel_time_s", pi, r.forward_kernel_s);
  t.set("backward_kernel_time_s", pi, r.backward_kernel_s);
  t.set("max_rel_error", pi, r.max_rel);
  t.set_int("parity_ok", pi, r.status == "ok" ? 1 : 0);
}

bool on_any_rank(MPI_Comm world, bool mine) {
  int local = mine ? 1 : 0, any = 0;
  RB_MPI_CHECK(MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, world));
  return any != 0;
}

std::vector<h5::Headline> tuning_headlines() {
  using h5::OverInner, h5::OverRanks;
  return {{"forward_time_s", OverInner::Median, OverRanks::Max},
          {"backward_time_s", OverInner::Median, OverRanks::Max},
          {"max_rel_error", OverInner::None, OverRanks::Max},
          {"status", OverInner::None, OverRanks::Rank0},
          {"forward_time_s", OverInner::Cv, OverRanks::Slowest}};
}

std::string tuning_table(const std::string& title, const std::vector<h5::PointRecord>& records,
                         std::size_t width) {
  h5::TextTable t({{"rows"},
                   {"head_dim"},
                   {"dtype", "", true},
                   {"causal"},
                   {"dilation", "(w/r)", true},
                   {"path", "", true},
                   {"auto", "", true},
                   {"fwd", "(ms)"},
                   {"bwd", "(ms)"},
                   {"max rel err"},
                   {"status", "(rank 0)", true}});
  t.repeat({0, 1, 2, 3, 4, 5});  // the block shape and the path
  for (const auto& r : records) {
    // Without the branch, the LongNet rows of one block size read as repeats of the dense row.
    const std::string dilation =
        r.num("segment") > 0 ? h5::fixed(r.num("segment"), 0) + "/" + h5::fixed(r.num("rate"), 0)
                             : "-";
    t.row({h5::fixed(r.num("block_rows"), 0), h5::fixed(r.num("head_dim"), 0), r.text("dtype"),
           h5::fixed(r.num("causal"), 0), dilation, r.text("path"), r.text("auto_path"),
           h5::sig3(r.num("forward_time_s") * 1e3), h5::sig3(r.num("backward_time_s") * 1e3),
           h5::sig3(r.num("max_rel_error")), r.text("status")});
  }
  return t.render(title + " every kernel path per block shape",
                  {"times: median over iterations, slowest rank; max rel err: largest over ranks"},
                  width);
}

SweepOutcome KernelTuningSweep::run(RunContext& ctx, h5::Group& out) {
  write_attributes(out);
  h5::PointsTable table = make_table();
  SweepOutcome outcome;
  // One backend per path, made when its first point comes (points are grouped by shape).
  std::vector<std::pair<std::string, std::unique_ptr<attn::AttentionBackend>>> backends;
  std::size_t pi = 0;
  for (; pi < points_.size(); ++pi) {
    const Point& pt = points_[pi];
    if (!ctx.progress.point_started(pi, pt.label)) break;  // a signal: the points before are kept
    auto found = std::find_if(backends.begin(), backends.end(),
                              [&](const auto& b) { return b.first == pt.path; });
    if (found == backends.end()) {
      backends.emplace_back(pt.path, ctx.paths.attention_backend({pt.path, "default"}));
      found = std::prev(backends.end());
    }
    // Every rank times its own device; the barrier keeps the ranks on the same point.
    RB_MPI_CHECK(MPI_Barrier(ctx.world));
    const PointResult r = run_point(ctx, *found->second, pt);
    record(table, pi, r);
    const std::string where = "point " + std::to_string(pi) + " (" + pt.label + ")";
    if (r.status == "oom") ctx.progress.note(where + ": out of memory on a rank, skipped there");
    if (!on_any_rank(ctx.world, r.status == "parity_failed")) continue;
    ctx.progress.note("PARITY FAILED at " + where + (r.failure.empty() ? "" : ": " + r.failure));
    if (outcome.ok) {
      outcome.ok = false;
      outcome.failure =
          where + ": parity failed" + (r.failure.empty() ? "" : " (" + r.failure + ")");
    }
  }
  table.keep_points(pi);
  table.write(out);
  report_results(ctx, table, tuning_headlines(), [&](const auto& r) {
    return tuning_table(results_title(*this), r, ctx.progress.table_width());
  });
  return outcome;
}

// RINGBENCH_FAULT_PARITY_PATH=PATH scales that path's output by 1.25 before the parity check:
// how the tests (and a sceptical user) see that a path failing parity is never tuned in.
bool fault_injected(const std::string& path) {
  const char* env = std::getenv("RINGBENCH_FAULT_PARITY_PATH");
  return env != nullptr && path == env;
}

double worst_rel(const ring::ParityReport& par) {
  double worst = -1.0;
  for (const ring::ErrorStats* e : {&par.out, &par.dq, &par.dk, &par.dv})
    if (!std::isnan(e->max_rel)) worst = std::max(worst, e->max_rel);
  return worst < 0 ? kNaN : worst;
}

PointResult KernelTuningSweep::run_point(RunContext& ctx, attn::AttentionBackend& backend,
                                         const Point& pt) const {
  const ring::Problem& prob = pt.problem;
  PointResult r;
  r.kernel_path = backend.name();
  // Ring size 1: this rank alone, so no rank waits for another's device.
  std::unique_ptr<ring::RingTransport> transport;
  std::unique_ptr<ring::RingAttention> ra;
  try {
    transport = ctx.paths.ring_transport(MPI_COMM_SELF, backend);
    ra = std::make_unique<ring::RingAttention>(prob, backend, *transport, true);
  } catch (const attn::OutOfMemory&) {
    r.status = "oom";
    return r;
  }
  using ring::Tensor;
  const std::uint64_t seed = static_cast<std::uint64_t>(p_.seed);
  const auto q = ring::make_shard(prob, 0, seed, Tensor::Q);
  const auto k = ring::make_shard(prob, 0, seed, Tensor::K);
  const auto v = ring::make_shard(prob, 0, seed, Tensor::V);
  const auto dO = ring::make_shard(prob, 0, seed, Tensor::dO);
  ra->load_inputs(q.data(), k.data(), v.data(), dO.data());
  time_iterations(*ra, r);

  ring::ParityOptions opt;
  opt.sample_rows = p_.sample_rows;
  ring::RingResult result = ra->result();
  if (fault_injected(pt.path))
    for (float& x : result.out) x *= 1.25f;
  const ring::ParityReport par =
      ring::check_parity(prob, seed, 0, MPI_COMM_SELF, result, true, opt);
  r.max_rel = worst_rel(par);
  if (!(r.max_rel <= tolerance(prob))) {
    r.status = "parity_failed";
    r.failure = "max rel error " + std::to_string(r.max_rel) + " > tolerance " +
                std::to_string(tolerance(prob));
  }
  return r;
}

double total(const std::vector<double>& steps) {
  double sum = 0.0;
  for (double x : steps) sum += x;
  return sum;
}

void KernelTuningSweep::time_iterations(ring::RingAttention& ra, PointResult& r) const {
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  for (std::int64_t it = 0; it < p_.warmup + p_.iterations; ++it) {
    const auto t0 = clock::now();
    ra.forward();  // ends synchronised
    const auto t1 = clock::now();
    ra.backward();
    const auto t2 = clock::now();
    if (it < p_.warmup) continue;
    r.forward_s.push_back(seconds(t0, t1));
    r.backward_s.push_back(seconds(t1, t2));
    r.forward_kernel_s.push_back(total(ra.forward_steps().compute));
    r.backward_kernel_s.push_back(total(ra.backward_steps().compute));
  }
}

// `dilations`: a list whose entries are `none` or a [segment, rate] pair.
std::vector<Dilation> parse_dilations(const cfg::Node& n) {
  if (!n.has("dilations")) return {Dilation{}};
  const cfg::Node list = n.child("dilations");
  if (!list.is_sequence())
    n.fail("dilations", "expected a list of `none` or [segment, rate] pairs");
  list.check_list_length();  // recorded as the segment_lengths and dilation_rates attributes
  std::vector<Dilation> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const cfg::Node e = list.element(i);
    const std::string entry = "entry " + std::to_string(i);
    if (e.yaml().IsScalar() && e.yaml().Scalar() == "none") {
      out.push_back(Dilation{});
      continue;
    }
    if (!e.is_sequence() || e.size() != 2)
      n.fail("dilations", entry + ": expected `none` or a [segment, rate] pair");
    Dilation d;
    try {
      d.segment = e.element(0).yaml().as<std::int64_t>();
      d.rate = e.element(1).yaml().as<std::int64_t>();
    } catch (const YAML::Exception&) {
      n.fail("dilations", entry + ": segment and rate must be integers");
    }
    if (d.segment < 1 || d.rate < 1 || d.rate > d.segment || d.segment % d.rate != 0)
      n.fail("dilations", entry + ": segment " + std::to_string(d.segment) + ", rate " +
                              std::to_string(d.rate) +
                              ": need 1 <= rate <= segment and segment % rate == 0");
    out.push_back(d);
  }
  if (out.empty())
    n.fail("dilations", "empty: give at least one entry (`none` for exact attention)");
  return out;
}

std::vector<bool> parse_causal(const cfg::KeyReader& r) {
  std::vector<bool> out;
  for (const std::string& c : r.choices("causal")) out.push_back(c == "true");
  return out;
}

std::string point_label(const ring::Problem& pr, const Dilation& d, const std::string& path) {
  return "rows=" + std::to_string(pr.seq_len) + " d=" + std::to_string(pr.head_dim) + " " +
         ring::to_string(pr.dtype) + (pr.causal ? " causal" : "") +
         (d.segment ? " w=" + std::to_string(d.segment) + " r=" + std::to_string(d.rate) : "") +
         " " + path;
}

// A LongNet segment tiles the block: a block shorter than the segment, or not a multiple of
// it, has no such shape (the grid crosses every size with every dilation; those are skipped).
bool fits(std::int64_t rows, const Dilation& d) {
  return d.segment == 0 || (rows >= d.segment && rows % d.segment == 0);
}

ring::Problem make_problem(const cfg::Node& n, const TuningParams& p, std::int64_t rows,
                           std::int64_t head_dim, const std::string& dtype, bool causal,
                           const Dilation& d) {
  ring::Problem pr;
  pr.batch = p.batch;
  pr.heads = p.num_heads;
  pr.head_dim = static_cast<int>(head_dim);
  pr.seq_len = rows;
  pr.ring_size = 1;
  pr.layout = ring::layout_from_string("contiguous");
  pr.causal = causal;
  pr.dtype = ring::dtype_from_string(dtype);
  if (d.segment) pr.branches.push_back({d.segment, d.rate});
  const std::string e = ring::problem_error(pr);
  if (!e.empty())
    n.fail(d.segment ? "dilations" : "block_rows", "block rows " + std::to_string(rows) + ": " + e);
  return pr;
}

// Every built path of this device that takes the block and is in `paths` (empty: all), in
// table order.
void add_points(attn::Device device, const ring::Problem& pr, const Dilation& d,
                const std::vector<std::string>& paths, std::vector<Point>& points) {
  attn::Dims dims;
  dims.batch = pr.batch;
  dims.heads = pr.heads;
  dims.head_dim = pr.head_dim;
  dims.q_rows = dims.kv_rows = pr.local_rows();
  const attn::KernelPath* builtin = attn::auto_kernel_path(
      device, pr.dtype, pr.head_dim, pr.causal, attn::kernel_shape_of(dims, pr.patterns().front()));
  for (const attn::KernelPath& kp : attn::kernel_paths()) {
    if (kp.device != device || !kp.built) continue;
    if (!paths.empty() && std::find(paths.begin(), paths.end(), kp.name) == paths.end()) continue;
    if (!attn::kernel_refusal({kp.name, "default"}, device, pr.dtype, pr.head_dim, pr.causal,
                              d.segment != 0)
             .empty())
      continue;
    points.push_back({pr, d, kp.name, builtin ? builtin->name : "", point_label(pr, d, kp.name)});
  }
}

}  // namespace

const std::vector<cfg::KeySpec>& kernel_tuning_keys() {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> keys = cfg::sweep_keys(
      "kernel_tuning",
      {integer("batch", "1", 1, 1 << 20, "batch of every block"),
       integer("num_heads", "4", 1, 1 << 16, "heads of every block"),
       required(integer("block_rows", "", 1, std::int64_t{1} << 32,
                        "block rows (query rows = key/value rows) to sweep")
                    .or_list()),
       integer("head_dims", "[64]", 1, 1024, "head dimensions to sweep").or_list(),
       dtype("dtype", "[fp32]", {"fp32", "fp16", "bf16"}, "storage dtypes to sweep")
           .or_list()
           .on_cuda("[bf16]"),
       choice("causal", "[false]", {"false", "true"}, "causal masking, one point set each")
           .or_list(),
       other("dilations", "list", "[none]", "none or [segment, rate] with rate dividing segment",
             "LongNet branches to sweep; none: exact attention"),
       choice("paths", "", {}, "kernel paths to time")
           .or_list()
           .computed("every built path of the device")
           .limited("the built kernel paths of this run's device"),
       integer("warmup", "2", 0, 1000000, "untimed iterations per point"),
       integer("iterations", "5", 1, 1000000, "timed iterations per point"),
       integer("seed", "1234", 0, INT64_MAX, "seed of the deterministic inputs"),
       number("tolerance", "", 0.0, 1.0, "largest relative error that passes parity (> 0)")
           .computed("by dtype: fp32 2e-4, fp16 5e-3, bf16 2e-2"),
       integer("sample_rows", "32", 2, 1 << 20, "rows per rank the parity check compares")});
  return keys;
}

std::unique_ptr<Sweep> parse_kernel_tuning(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::KeyReader r(spec.node, kernel_tuning_keys(), ctx.backend);
  const cfg::Node& n = spec.node;
  TuningParams p;
  p.world_size = ctx.world_size;
  p.batch = static_cast<int>(r.integer("batch"));
  p.num_heads = static_cast<int>(r.integer("num_heads"));
  if (!n.has("block_rows"))
    n.fail("block_rows", "required: the block rows to sweep, e.g. [512, 4096, 65536]");
  p.block_rows = r.integers("block_rows", {});
  p.head_dims = r.integers("head_dims");
  const bool cuda = ctx.backend == Backend::Cuda;
  p.dtypes = r.dtypes("dtype");
  p.causal = parse_causal(r);
  p.dilations = parse_dilations(n);
  p.warmup = r.integer("warmup");
  p.iterations = r.integer("iterations");
  p.seed = r.integer("seed");
  // Absent: the dtype's default; an explicit 0 could never pass a 16-bit block, so it is refused
  // (as in ring_attention's validate.tolerance).
  p.tolerance = r.number("tolerance", 0.0);
  if (n.has("tolerance") && !(p.tolerance > 0))
    n.fail("tolerance",
           "tolerance must be > 0; leave it out for the dtype's default (bf16 0.02, fp16 0.005, "
           "fp32 0.0002)");
  p.sample_rows = static_cast<int>(r.integer("sample_rows"));

  const attn::Device device = cuda ? attn::Device::Cuda : attn::Device::Host;
  std::vector<std::string> built;
  for (const attn::KernelPath& kp : attn::kernel_paths())
    if (kp.device == device && kp.built) built.push_back(kp.name);
  const std::vector<std::string> paths = r.choices("paths", built, built);
  std::vector<Point> points;
  std::size_t unfit = 0;
  for (auto rows : p.block_rows)
    for (auto hd : p.head_dims)
      for (const auto& dt : p.dtypes)
        for (bool c : p.causal)
          for (const Dilation& d : p.dilations) {
            if (fits(rows, d))
              add_points(device, make_problem(n, p, rows, hd, dt, c, d), d, paths, points);
            else
              ++unfit;
          }
  if (points.empty() && unfit > 0)
    n.fail("dilations",
           "no block size of block_rows is a multiple of a segment of dilations "
           "(a dilated shape needs block rows >= its segment, divisible by it)");
  if (points.empty())
    n.fail("head_dims", "no kernel path of this build on " + std::string(attn::to_string(device)) +
                            " takes any block of the grid");
  return std::make_unique<KernelTuningSweep>(std::move(p), std::move(points));
}

}  // namespace rb
