#include "sweeps/compute.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "host/profiling_kernels.hpp"
#include "profiling/timing.hpp"

#ifdef RINGBENCH_HAVE_CUDA
#include "cuda/profiling/profiling_cuda.hpp"
#endif

namespace rb {
namespace {

const std::vector<std::string> kGpuTypes = {"bfloat16", "float16", "tf32", "float32", "float64"};
const std::vector<std::string> kHostTypes = {"float32", "float64"};

struct AttentionParams {
  bool enabled = false;
  std::string kernel = "auto";
  std::int64_t batch = 1;
  std::int64_t heads = 16;
  std::int64_t head_dim = 128;
  std::vector<std::int64_t> rows = {1024, 4096};  // query rows = key/value rows per block
  std::string dtype = "bfloat16";
  bool causal = false;
};

struct ComputeParams {
  std::vector<std::int64_t> sizes;
  std::vector<std::string> dtypes;
  std::int64_t warmup = 2;
  std::int64_t iterations = 10;
  AttentionParams attention;
  bool gpu = false;
};

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
        lines.push_back("attention block forward (" + p_.attention.kernel + ") " + p_.attention.dtype +
                        " rows " + std::to_string(r) + ", every rank at once");
    return lines;
  }
  std::uint64_t estimated_output_bytes() const override {
    return plan().size() * static_cast<std::uint64_t>(p_.iterations + 2) * 8u * 64u + 4096;
  }
  SweepOutcome run(RunContext& ctx, h5::Group& out) override;

 private:
  ComputeParams p_;
};

#ifdef RINGBENCH_HAVE_CUDA
attn::DType attn_dtype(const std::string& s) {
  if (s == "float32") return attn::DType::F32;
  if (s == "float16") return attn::DType::F16;
  return attn::DType::BF16;
}

// Forward block rate of the ring attention kernel path: one (query block, key/value block)
// pair of `rows` rows each, timed with the backend's marks.
std::vector<double> attention_seconds(const PathFactories& paths, const AttentionParams& a,
                                      std::int64_t rows, int warmup, int iterations) {
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
  std::vector<double> s;
  for (auto [a0, a1] : marks) s.push_back(be->seconds_between(a0, a1));
  return s;
}
#endif

SweepOutcome ComputeSweep::run(RunContext& ctx, h5::Group& out) {
  const int rank = ctx.layout.rank;
  const std::size_t I = static_cast<std::size_t>(p_.iterations);
  const std::size_t D = p_.dtypes.size(), S = p_.sizes.size();
  ProgressReporter& progress = ctx.progress;
  std::size_t point = 0;
  SweepOutcome outcome;
  std::vector<double> tflops(D * S, 0.0), iters(D * S * I, 0.0), err(D * S, 0.0);
#ifdef RINGBENCH_HAVE_CUDA
  std::unique_ptr<prof::cuda::Stream> stream;
  if (p_.gpu) stream = std::make_unique<prof::cuda::Stream>();
#endif
  for (std::size_t d = 0; d < D; ++d) {
    for (std::size_t si = 0; si < S; ++si) {
      const int n = static_cast<int>(p_.sizes[si]);
      progress.point_started(point, plan()[point]);
      ++point;
      RB_MPI_CHECK(MPI_Barrier(ctx.world));
      std::vector<double> s;
      double flops = 2.0 * static_cast<double>(n) * n * n;
      if (p_.gpu) {
#ifdef RINGBENCH_HAVE_CUDA
        s = prof::cuda::gemm_seconds(p_.dtypes[d], n, n, n, static_cast<int>(p_.warmup),
                                     static_cast<int>(p_.iterations), stream->get());
#endif
      } else {
        const auto r = prof::host::gemm(n, p_.dtypes[d] == "float64", static_cast<int>(p_.warmup),
                                        static_cast<int>(p_.iterations));
        s = r.seconds;
        flops = r.flops;
        err[d * S + si] = r.max_abs_error;
        if (r.max_abs_error > 0.5 && outcome.ok) {
          outcome.ok = false;
          outcome.failure = "compute: rank " + std::to_string(rank) + ": Kokkos GEMM " + p_.dtypes[d] + " " +
                            std::to_string(n) + " is off by " + std::to_string(r.max_abs_error);
        }
      }
      tflops[d * S + si] = flops / prof::mean_of(s) / 1e12;
      std::copy(s.begin(), s.end(), iters.begin() + static_cast<std::ptrdiff_t>((d * S + si) * I));
    }
  }
  out.attr("engine", p_.gpu ? "cuBLASLt (heuristic algorithm, 32 MiB workspace)" : "Kokkos GEMM-like kernel (default execution space)");
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.write_shared("gemm_size", p_.sizes, {S}, {"1", "M = N = K of each GEMM size"});
  out.write_shared_strings("gemm_dtype", p_.dtypes, {"1", "GEMM element type (tf32: float32 data on TF32 tensor cores)"});
  out.write_per_rank("gemm_tflops", tflops, {D, S}, {"TFLOP/s", "2 n^3 / mean call time, [dtype, size]"});
  out.write_per_rank("gemm_iteration_s", iters, {D, S, I}, {"s", "time of each timed GEMM call, [dtype, size, iteration]"});
  if (!p_.gpu)
    out.write_per_rank("gemm_max_abs_error", err, {D, S}, {"1", "largest |C - exact| of the Kokkos kernel's result"});

  if (p_.attention.enabled) {
    const std::size_t R = p_.attention.rows.size();
    std::vector<double> att(R, 0.0), att_iters(R * I, 0.0);
    std::string note;
#ifdef RINGBENCH_HAVE_CUDA
    // A kernel path that cannot run (e.g. cudnn for this shape) is a note, not a failed run;
    // ranks agree after every point so none waits in a barrier the others left.
    for (std::size_t r = 0; r < R; ++r) {
      progress.point_started(point, plan()[point]);
      ++point;
      RB_MPI_CHECK(MPI_Barrier(ctx.world));
      try {
        const auto s = attention_seconds(ctx.paths, p_.attention, p_.attention.rows[r], static_cast<int>(p_.warmup),
                                         static_cast<int>(p_.iterations));
        const double rows = static_cast<double>(p_.attention.rows[r]);
        // QK^T and PV: 2 matmuls of 2 * rows * rows * head_dim flops per (batch, head); half when causal.
        double flops = 4.0 * static_cast<double>(p_.attention.batch * p_.attention.heads) * rows * rows *
                       static_cast<double>(p_.attention.head_dim);
        if (p_.attention.causal) flops *= 0.5;
        att[r] = flops / prof::mean_of(s) / 1e12;
        std::copy(s.begin(), s.end(), att_iters.begin() + static_cast<std::ptrdiff_t>(r * I));
      } catch (const std::exception& e) {
        note = std::string("failed: ") + e.what();
      }
      int failed = note.empty() ? 0 : 1, any = 0;
      RB_MPI_CHECK(MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, ctx.world));
      if (any) break;
    }
#endif
    // Agree on whether every rank measured, so all ranks write the same datasets.
    int bad = note.empty() ? 0 : 1, any_bad = 0;
    RB_MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, ctx.world));
    if (any_bad) {
      out.attr("attention", "not measured on every rank" + (note.empty() ? std::string() : ": " + note));
      progress.note("attention block rate not measured: " + (note.empty() ? std::string("another rank failed") : note));
    } else {
      out.attr("attention", "forward block (" + p_.attention.kernel + "), " + p_.attention.dtype +
                                ", batch " + std::to_string(p_.attention.batch) + ", heads " +
                                std::to_string(p_.attention.heads) + ", head_dim " +
                                std::to_string(p_.attention.head_dim) + (p_.attention.causal ? ", causal" : ""));
      out.write_shared("attention_rows", p_.attention.rows, {R}, {"1", "query rows = key/value rows of the block"});
      out.write_per_rank("attention_tflops", att, {R}, {"TFLOP/s", "4 b h rows^2 d (halved when causal) / mean forward time"});
      out.write_per_rank("attention_iteration_s", att_iters, {R, I}, {"s", "time of each timed forward block"});
    }
  } else if (!p_.gpu) {
    out.attr("attention", "skipped: the attention block rate is measured on the cuda backend only");
  }
  return outcome;
}

}  // namespace

std::unique_ptr<Sweep> parse_compute(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::Node& n = spec.node;
  n.allow_only({"type", "name", "sizes", "dtypes", "warmup", "iterations", "attention"});
  ComputeParams p;
  p.gpu = ctx.backend == Backend::Cuda;
  p.sizes = n.get_int_list("sizes", p.gpu ? std::vector<std::int64_t>{1024, 2048, 4096, 8192}
                                          : std::vector<std::int64_t>{128, 256, 512},
                           1, 65536);
  if (p.gpu) {
    p.dtypes = n.get_choice_list("dtypes", {"bfloat16", "float16", "tf32", "float32"}, kGpuTypes);
  } else {
    // Accept the GPU names so one file validates on both backends, but say why they do not run.
    const auto all = n.get_choice_list("dtypes", kHostTypes, kGpuTypes);
    for (const auto& t : all)
      if (t != "float32" && t != "float64")
        n.fail("dtypes", "dtype " + t + " needs the cuda backend (cuBLASLt); the host path's Kokkos kernel runs float32 and float64");
    p.dtypes = all;
  }
  p.warmup = n.get_int("warmup", p.warmup, 0, 100000);
  p.iterations = n.get_int("iterations", p.iterations, 1, 100000);
  if (n.has("attention")) {
    const cfg::Node a = n.child("attention");
    a.require_map();
    a.allow_only({"kernel", "batch", "heads", "head_dim", "rows", "dtype", "causal"});
    AttentionParams& at = p.attention;
    at.kernel = a.get_choice("kernel", at.kernel, {"auto", "flash", "cudnn", "naive"});
    at.batch = a.get_int("batch", at.batch, 1, 1024);
    at.heads = a.get_int("heads", at.heads, 1, 1024);
    at.head_dim = a.get_int("head_dim", at.head_dim, 8, 512);
    at.rows = a.get_int_list("rows", at.rows, 1, 1 << 22);
    at.dtype = a.get_choice("dtype", at.dtype, {"bfloat16", "float16", "float32"});
    at.causal = a.get_bool("causal", at.causal);
    // On the host the block rate is not measured (recorded as skipped in the output).
    at.enabled = p.gpu;
  }
  return std::make_unique<ComputeSweep>(std::move(p));
}

}  // namespace rb
