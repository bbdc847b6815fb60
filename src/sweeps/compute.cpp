#include "sweeps/compute.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>
#include <utility>

#include "dtype_names.hpp"
#include "kernel_paths.hpp"
#include "metrics/stats.hpp"
#include "metrics/table.hpp"
#include "profiling/engine.hpp"
#include "profiling/timing.hpp"
#include "runtime/mpi_util.hpp"
#include "sweeps/oom_point.hpp"

namespace rb {
namespace {

const std::vector<std::string> kGpuTypes = {"bf16", "fp16", "tf32", "fp32", "fp64"};
const std::vector<std::string> kHostTypes = {"fp32", "fp64"};

// Dtypes by their long names (long_dtype_name): the GEMM engine takes them, and the file and
// rb-analysis (peak tables, the scheme model's compute rates) have always used them.
struct AttentionParams {
  bool enabled = false;
  std::string kernel;
  std::int64_t batch = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::vector<std::int64_t> rows;  // query rows = key/value rows per block
  std::string dtype;
  bool causal = false;
};

struct ComputeParams {
  int world_size = 1;  // the plan's ranks: each writes its row
  std::vector<std::int64_t> sizes;
  std::vector<std::string> dtypes;
  std::int64_t warmup = 0;  // as parsed: a key left out is its default in compute_keys()
  std::int64_t iterations = 0;
  AttentionParams attention;
  bool gpu = false;
};

using prof::Timing;

class ComputeSweep final : public Sweep {
 public:
  explicit ComputeSweep(ComputeParams p) : p_(std::move(p)) {}
  std::string type() const override { return "compute"; }
  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    for (const auto& t : p_.dtypes)
      for (auto n : p_.sizes)
        lines.push_back(std::string(p_.gpu ? "cuBLASLt" : "Kokkos") + " GEMM " + t + " " +
                        std::to_string(n) + "^3, every rank at once");
    if (p_.attention.enabled)
      for (auto r : p_.attention.rows)
        lines.push_back("attention block forward (" + p_.attention.kernel + ") " +
                        p_.attention.dtype + " rows " + std::to_string(r) + ", every rank at once");
    return lines;
  }
  std::size_t point_count() const override {
    return p_.dtypes.size() * p_.sizes.size() +
           (p_.attention.enabled ? p_.attention.rows.size() : 0);
  }
  std::string iterations_text() const override {
    return rb::iterations_text(p_.iterations, p_.warmup);
  }
  // GEMM: 2 n^3 FLOPs per call; attention: 4 b h rows^2 d (half when causal); at the device rate.
  double estimated_seconds(const CostAssumptions& a) const override {
    double flop = 0;
    for (std::size_t t = 0; t < p_.dtypes.size(); ++t)
      for (auto n : p_.sizes)
        flop += 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    const AttentionParams& at = p_.attention;
    if (at.enabled)
      for (auto r : at.rows)
        flop += 4.0 * static_cast<double>(at.batch * at.heads * at.head_dim) *
                static_cast<double>(r) * static_cast<double>(r) * (at.causal ? 0.5 : 1.0);
    return static_cast<double>(p_.iterations + p_.warmup) * flop / (a.device_tflops * 1e12) +
           static_cast<double>(point_count()) * a.kernel_point_s;
  }
  // The table as write() lays it out (every dataset counted; the engine's name a placeholder).
  std::uint64_t estimated_output_bytes() const override {
    return point_table("cublaslt").planned_bytes(static_cast<std::size_t>(p_.world_size));
  }
  SweepOutcome run(RunContext& ctx, h5::Group& out) override;
  // The most host bytes one rank's GEMM takes (0 on the cuda backend: device memory).
  std::optional<HostMemoryNeed> host_memory_need() const override;

 private:
  h5::PointsTable point_table(const std::string& gemm_engine) const;
  std::string screen_table(const std::vector<h5::PointRecord>& records, std::size_t width) const;
  ComputeParams p_;
};

attn::DType attn_dtype(const std::string& s) {
  if (s == "float32") return attn::DType::F32;
  if (s == "float16") return attn::DType::F16;
  return attn::DType::BF16;
}

// Forward block rate of the ring attention kernel path: one (query block, key/value block)
// pair of `rows` rows each, timed with the backend's marks.
Timing attention_timing(const PathFactories& paths, const AttentionParams& a, std::int64_t rows,
                        std::int64_t warmup, std::int64_t iterations) {
  auto be = paths.attention_backend({a.kernel, "default"});
  attn::ForwardBlock blk;
  blk.dims.batch = static_cast<int>(a.batch);
  blk.dims.heads = static_cast<int>(a.heads);
  blk.dims.head_dim = static_cast<int>(a.head_dim);
  blk.dims.q_rows = rows;
  blk.dims.kv_rows = rows;
  blk.dtype = attn_dtype(a.dtype);
  blk.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  blk.q = {0, rows, 0, 1};
  blk.kv = {0, rows, 0, 1};
  blk.pattern.causal = a.causal;
  const std::size_t elems = static_cast<std::size_t>(a.batch * a.heads * rows * a.head_dim);
  const std::size_t in_bytes = elems * attn::dtype_size(blk.dtype);
  const std::int64_t lse_rows = a.batch * a.heads * rows;
  void* q = be->allocate(in_bytes);
  void* k = be->allocate(in_bytes);
  void* v = be->allocate(in_bytes);
  void* o = be->allocate(elems * sizeof(float));
  void* l = be->allocate(static_cast<std::size_t>(lse_rows) * sizeof(float));
  struct Release {
    attn::AttentionBackend& b;
    std::vector<void*> ps;
    ~Release() {
      for (void* p : ps) b.release(p);
    }
  } release{*be, {q, k, v, o, l}};
  be->fill_zero(q, in_bytes);
  be->fill_zero(k, in_bytes);
  be->fill_zero(v, in_bytes);
  blk.q_data = q;
  blk.k_data = k;
  blk.v_data = v;
  blk.out = static_cast<float*>(o);
  blk.lse = static_cast<float*>(l);
  for (int w = 0; w < warmup; ++w) {
    be->init_forward(blk.out, blk.lse, lse_rows, blk.dims.head_dim);
    be->forward(blk);
  }
  be->synchronize();
  be->reset_marks();
  std::vector<std::pair<int, int>> marks;
  for (int it = 0; it < iterations; ++it) {
    be->init_forward(blk.out, blk.lse, lse_rows, blk.dims.head_dim);
    const int m0 = be->mark();
    be->forward(blk);
    marks.emplace_back(m0, be->mark());
  }
  be->synchronize();
  Timing t;
  for (auto [a0, a1] : marks) t.seconds.push_back(be->seconds_between(a0, a1));
  // QK^T and PV: 2 matmuls of 2 * rows * rows * head_dim flops per (batch, head); half when causal.
  const double r = static_cast<double>(rows);
  t.flop = 4.0 * static_cast<double>(a.batch * a.heads) * r * r * static_cast<double>(a.head_dim);
  if (a.causal) t.flop *= 0.5;
  return t;
}

struct ComputePoint {
  bool attention = false;
  std::string dtype;
  std::int64_t size = 0;  // M = N = K of a GEMM; rows of an attention block
};

// Host bytes of a host-path GEMM: A, B and C, n x n each.
std::uint64_t gemm_host_bytes(const std::string& dtype, std::int64_t n) {
  const std::uint64_t elem = dtype == "float64" ? 8 : 4;
  return 3 * elem * static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(n);
}

std::vector<ComputePoint> compute_points(const ComputeParams& p) {
  std::vector<ComputePoint> pts;
  for (const auto& t : p.dtypes)
    for (auto n : p.sizes) pts.push_back({false, t, n});
  if (p.attention.enabled)
    for (auto r : p.attention.rows) pts.push_back({true, p.attention.dtype, r});
  return pts;
}

h5::PointsTable ComputeSweep::point_table(const std::string& gemm_engine) const {
  const auto pts = compute_points(p_);
  h5::PointsTable t(pts.size());
  t.key("operation",
        prof::column<std::string>(
            pts, [](const ComputePoint& p) { return p.attention ? "attention_forward" : "gemm"; }),
        {"1", "gemm, or attention_forward: one forward block of the ring attention kernel path"});
  t.key("engine",
        prof::column<std::string>(
            pts,
            [&](const ComputePoint& p) { return p.attention ? p_.attention.kernel : gemm_engine; }),
        {"1", "cublaslt, kokkos, or the attention kernel path (auto, flash, cudnn, naive)"});
  t.key("dtype", prof::column<std::string>(pts, [](const ComputePoint& p) { return p.dtype; }),
        {"1", "element type (tf32: float32 data on TF32 tensor cores)"});
  t.key("size", prof::column<std::int64_t>(pts, [](const ComputePoint& p) { return p.size; }),
        {"1", "M = N = K of a GEMM; query rows = key/value rows of an attention block"});
  t.metric("rate_tflops", {"TFLOP/s",
                           "GEMM: 2 n^3 / mean call time; attention: 4 b h rows^2 d (halved when "
                           "causal) / mean forward time"});
  t.metric("iteration_time_s", {"s", "time of each timed call"},
           {static_cast<std::uint64_t>(p_.iterations)}, {"iteration"});
  t.metric("max_abs_error",
           {"1", "largest |C - exact| of the Kokkos GEMM's result (host path; NaN elsewhere)"});
  oom::declare_columns(t);
  h5::Judging j;
  j.headline = {"rate_tflops"};
  j.noise = "compute";
  j.each_rank = true;  // each rank's own device: one rank's bad moment is not the point's figure
  j.iteration_times = "iteration_time_s";
  t.judging(std::move(j));
  return t;
}

std::vector<h5::Headline> compute_headlines() {
  using h5::OverInner, h5::OverRanks;
  return {{"rate_tflops", OverInner::None, OverRanks::Min},
          {"rate_tflops", OverInner::None, OverRanks::Max},
          {"iteration_time_s", OverInner::Median, OverRanks::Max},
          {"status", OverInner::None, OverRanks::Rank0},
          {"iteration_time_s", OverInner::Cv, OverRanks::Slowest}};
}

std::string ComputeSweep::screen_table(const std::vector<h5::PointRecord>& records,
                                       std::size_t width) const {
  h5::TextTable t({{"operation", "", true},
                   {"engine", "", true},
                   {"dtype", "", true},
                   {"size", "(n)"},
                   {"min rank", "(TFLOP/s)"},
                   {"max rank", "(TFLOP/s)"},
                   {"median time", "(ms)"},
                   {"status", "", true}});
  t.repeat({0, 1, 2, 3});
  for (const auto& r : records) {
    double lo = NAN, hi = NAN;  // the two rate_tflops headlines: min, then max over ranks
    for (const auto& f : r.metrics)
      if (f.name == "rate_tflops") (std::isnan(lo) ? lo : hi) = f.number;
    t.row({r.text("operation"), r.text("engine"), r.text("dtype"), h5::fixed(r.num("size"), 0),
           h5::sig3(lo), h5::sig3(hi), h5::sig3(r.num("iteration_time_s") * 1e3),
           r.text("status")});
  }
  return t.render(results_title(*this) + " GEMM (n x n x n) and attention block rate per rank",
                  {"TFLOP/s: FLOPs / mean call time of each rank (slowest and fastest rank); "
                   "time: median over iterations, slowest rank; status oom: an allocation "
                   "failed on some rank (oom_* in the file)"},
                  width);
}

std::optional<Sweep::HostMemoryNeed> ComputeSweep::host_memory_need() const {
  std::uint64_t most = 0;
  if (!p_.gpu)
    for (const auto& t : p_.dtypes)
      for (auto n : p_.sizes) most = std::max(most, gemm_host_bytes(t, n));
  return HostMemoryNeed{"sizes", most, "the compute sweep's largest GEMM (3 matrices of n x n)"};
}

SweepOutcome ComputeSweep::run(RunContext& ctx, h5::Group& out) {
  const int rank = ctx.layout.rank;
  const auto pts = compute_points(p_);
  const auto labels = plan();
  const std::unique_ptr<prof::ComputeEngine> engine = prof::make_compute_engine(ctx.backend);
  h5::PointsTable table = point_table(engine->gemm_engine());
  SweepOutcome outcome;
  std::string note;
  std::size_t pi = 0;
  for (; pi < pts.size(); ++pi) {
    const ComputePoint& pt = pts[pi];
    if (!ctx.progress.point_started(pi, labels[pi])) break;  // a signal: the points before are kept
    const std::uint64_t available = oom::meminfo_bytes("MemAvailable");
    RB_MPI_CHECK(MPI_Barrier(ctx.world));
    Timing r;
    std::string error;  // an attention kernel path that cannot run here (not memory)
    const oom::Record ran_out = oom::attempt(
        "compute " + labels[pi], pt.attention || p_.gpu ? 0 : gemm_host_bytes(pt.dtype, pt.size),
        ctx.layout.local_size, available, [&] {
          if (!pt.attention) {
            r = engine->gemm(pt.dtype, static_cast<int>(pt.size), static_cast<int>(p_.warmup),
                             static_cast<int>(p_.iterations));
            return;
          }
          if (!note.empty()) return;
          try {
            r = attention_timing(ctx.paths, p_.attention, pt.size, p_.warmup, p_.iterations);
          } catch (const attn::OutOfMemory&) {
            throw;  // an oom point, not a path that cannot run
          } catch (const std::exception& e) {
            error = std::string("failed: ") + e.what();
          }
        });
    const bool oom_point = oom::on_any_rank(ran_out, ctx.world);
    oom::record_status(table, pi, oom_point, ran_out);
    if (pt.attention) {
      // A kernel path that cannot run (e.g. cudnn for this shape) is a note, not a failed run;
      // ranks agree after every point so none waits in a barrier the others left.
      if (note.empty()) note = error;
      if (mpi::any_rank(!note.empty(), ctx.world) && note.empty()) note = "failed on another rank";
      if (!note.empty()) continue;
    }
    if (oom_point) {
      ctx.progress.note("point " + std::to_string(pi) + " (" + labels[pi] +
                        "): out of memory, skipped");
      continue;
    }
    if (!pt.attention && r.max_abs_error > 0.5 && outcome.ok) {
      outcome.ok = false;
      outcome.failure = "compute: rank " + std::to_string(rank) + ": Kokkos GEMM " + pt.dtype +
                        " " + std::to_string(pt.size) + " is off by " +
                        std::to_string(r.max_abs_error);
    }
    table.set("rate_tflops", pi, r.flop / stats::mean(r.seconds) / 1e12);
    table.set("iteration_time_s", pi, r.seconds);
    if (r.max_abs_error >= 0) table.set("max_abs_error", pi, r.max_abs_error);
  }
  out.attr("engine", engine->description());
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  if (p_.attention.enabled) {
    const AttentionParams& a = p_.attention;
    out.attr("attention", note.empty()
                              ? "forward block (" + a.kernel + "), " + a.dtype + ", batch " +
                                    std::to_string(a.batch) + ", heads " + std::to_string(a.heads) +
                                    ", head_dim " + std::to_string(a.head_dim) +
                                    (a.causal ? ", causal" : "")
                              : "not measured on every rank: " + note);
    if (!note.empty()) ctx.progress.note("attention block rate not measured: " + note);
  } else if (!p_.gpu) {
    out.attr("attention", "skipped: the attention block rate is measured on the cuda backend only");
  }
  table.keep_points(pi);
  table.write(out);
  report_results(ctx, table, compute_headlines(),
                 [&](const auto& r) { return screen_table(r, ctx.progress.table_width()); });
  return outcome;
}

}  // namespace

const std::vector<cfg::KeySpec>& compute_keys() {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> attention = {
      choice("kernel", "auto", attn::kernel_choices(attn::Device::Cuda),
             "the attention kernel path (the GPU's rows of the kernel path table)"),
      integer("batch", "1", 1, 1024, "batch of the block"),
      integer("heads", "16", 1, 1024, "heads of the block"),
      integer("head_dim", "128", 8, 512, "head dimension"),
      integer("rows", "[1024, 4096]", 1, 1 << 22,
              "query rows = key/value rows of the block; one point each")
          .or_list(),
      dtype("dtype", "bf16", {"bf16", "fp16", "fp32"}, "storage dtype of Q, K, V"),
      flag("causal", "false", "causal masking (halves the FLOPs counted)")};
  static const std::vector<cfg::KeySpec> keys = cfg::sweep_keys(
      "compute",
      {integer("sizes", "[128, 256, 512]", 1, 65536, "M = N = K of each GEMM")
           .or_list()
           .on_cuda("[1024, 2048, 4096, 8192]"),
       dtype("dtypes", "[fp32, fp64]", kGpuTypes,
             "GEMM types; the host path runs fp32 and fp64 and refuses the others, naming the "
             "cuda backend")
           .or_list()
           .on_cuda("[bf16, fp16, tf32, fp32]"),
       integer("warmup", "2", 0, 100000, "untimed calls per point"),
       integer("iterations", "10", 1, 100000, "timed calls per point"),
       map("attention", attention,
           "the attention block rate (cuda backend only; recorded as skipped on the host)")
           .computed("absent (not measured)")});
  return keys;
}

namespace {

std::vector<std::string> long_names(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& name : names) out.emplace_back(long_dtype_name(name));
  return out;
}

AttentionParams parse_attention(const cfg::KeyReader& r, bool gpu) {
  AttentionParams at;
  at.kernel = r.choice("kernel");
  at.batch = r.integer("batch");
  at.heads = r.integer("heads");
  at.head_dim = r.integer("head_dim");
  at.rows = r.integers("rows");
  at.dtype = long_dtype_name(r.dtype("dtype"));
  at.causal = r.flag("causal");
  // On the host the block rate is not measured (recorded as skipped in the output).
  at.enabled = gpu;
  return at;
}

}  // namespace

std::unique_ptr<Sweep> parse_compute(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::KeyReader r(spec.node, compute_keys(), ctx.backend);
  ComputeParams p;
  p.gpu = ctx.backend == Backend::Cuda;
  p.sizes = r.integers("sizes");
  const std::vector<std::string> dtypes = r.dtypes("dtypes");
  // The GPU names validate on the host too, so one file serves both; here they are refused.
  for (const auto& t : dtypes)
    if (!p.gpu && std::find(kHostTypes.begin(), kHostTypes.end(), t) == kHostTypes.end())
      spec.node.fail("dtypes", "dtype " + t +
                                   " needs the cuda backend (cuBLASLt); the host path's Kokkos "
                                   "kernel runs fp32 and fp64");
  p.dtypes = long_names(dtypes);
  p.warmup = r.integer("warmup");
  p.iterations = r.integer("iterations");
  if (r.has("attention")) p.attention = parse_attention(r.map("attention"), p.gpu);
  p.world_size = ctx.world_size;
  return std::make_unique<ComputeSweep>(std::move(p));
}

}  // namespace rb
