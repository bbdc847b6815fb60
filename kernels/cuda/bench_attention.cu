// ringbench_kernel_bench: times one block pair (Sq = Sk = S) forward and backward per CUDA
// kernel path of the table (kernels/kernel_paths.hpp), through the same CudaBackend the ring
// drives, with its CUDA-event marks (warm-up, N repeats, median), and prints TFLOP/s by the
// FlashAttention convention (forward 4*b*h*S*S*d, halved when causal; backward 2.5x the
// forward) and the error of each path against the naive (cuBLAS) path.
// Builds with plain nvcc (see launch/bench_kernels.sh); no MPI.
//
//   ringbench_kernel_bench --seq 32768 --heads 16 --head-dim 128 --dtype bf16 [--causal]
//       [--batch 1] [--kernels flash,naive:default] [--all-tiles] [--repeats 10] [--warmup 3]
//       [--no-backward] [--no-check] [--segment W --rate R]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "check.hpp"
#include "cuda_backend.hpp"
#include "kernel_paths.hpp"

using namespace rb::attn;

namespace {

struct Options {
  std::int64_t seq = 4096;
  int heads = 16, head_dim = 128, batch = 1;
  DType dtype = DType::BF16;
  bool causal = false, backward = true, check = true, all_tiles = false;
  std::int64_t segment = 0, rate = 1;
  int repeats = 10, warmup = 3;
  std::vector<KernelChoice> kernels;  // empty: every built CUDA row
};

// Every built CUDA row of the table, with its default tile.
std::vector<KernelChoice> built_cuda_paths() {
  std::vector<KernelChoice> out;
  for (const auto& k : kernel_paths())
    if (k.device == Device::Cuda && k.built) out.push_back({k.name, "default"});
  return out;
}

void print_help() {
  std::printf(
      "ringbench_kernel_bench: one block pair forward and backward per CUDA kernel path\n"
      "  --seq S --heads H --head-dim D --batch B --dtype bf16|fp16|fp32 [--causal]\n"
      "  [--segment W --rate R] [--repeats N] [--warmup N] [--no-backward] [--no-check]\n"
      "  --kernels PATH[:TILE],...   (default: every built path, default tile)\n"
      "  --all-tiles                 every tile variant of each path that applies to the block\n"
      "kernel paths (kernels/kernel_paths.cpp):\n");
  for (const auto& k : kernel_paths()) {
    if (k.device != Device::Cuda) continue;
    std::printf("  %-6s %s%s\n", k.name, k.built ? "" : "[not built] ", k.summary);
    for (const auto& t : k.tiles) std::printf("         tile %-18s %s\n", t.name, t.summary);
  }
}

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr, "ringbench_kernel_bench: %s (see --help)\n", msg.c_str());
  std::exit(2);
}

std::vector<KernelChoice> parse_kernels(const std::string& list) {
  std::vector<KernelChoice> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.find(':');
    KernelChoice c;
    c.path = item.substr(0, colon);
    if (colon != std::string::npos) c.tile = item.substr(colon + 1);
    out.push_back(c);
  }
  return out;
}

DType parse_dtype(const std::string& t) {
  if (t == "bf16") return DType::BF16;
  if (t == "fp16") return DType::F16;
  if (t == "fp32") return DType::F32;
  usage("dtype must be bf16, fp16 or fp32");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + a);
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      print_help();
      std::exit(0);
    } else if (a == "--seq")
      o.seq = std::stoll(next());
    else if (a == "--heads")
      o.heads = std::stoi(next());
    else if (a == "--head-dim")
      o.head_dim = std::stoi(next());
    else if (a == "--batch")
      o.batch = std::stoi(next());
    else if (a == "--dtype")
      o.dtype = parse_dtype(next());
    else if (a == "--causal")
      o.causal = true;
    else if (a == "--no-backward")
      o.backward = false;
    else if (a == "--no-check")
      o.check = false;
    else if (a == "--all-tiles")
      o.all_tiles = true;
    else if (a == "--segment")
      o.segment = std::stoll(next());
    else if (a == "--rate")
      o.rate = std::stoll(next());
    else if (a == "--repeats")
      o.repeats = std::stoi(next());
    else if (a == "--warmup")
      o.warmup = std::stoi(next());
    else if (a == "--kernels")
      o.kernels = parse_kernels(next());
    else
      usage("unknown argument " + a);
  }
  if (o.kernels.empty()) o.kernels = built_cuda_paths();
  return o;
}

// The runs: each choice (with every tile variant that applies to the block when asked), each
// refused by the table before any GPU work when it cannot run; naive last as the reference.
std::vector<KernelChoice> runs_of(const Options& o) {
  std::vector<KernelChoice> runs;
  const bool dilated = o.segment > 0;
  for (const KernelChoice& c : o.kernels) {
    std::vector<KernelChoice> expanded{c};
    const KernelPath* row = find_kernel_path(c.path, Device::Cuda);
    if (o.all_tiles && row) {
      expanded.clear();
      for (const auto& t : row->tiles)
        if (t.applies.takes(o.dtype, o.head_dim, o.causal, dilated))
          expanded.push_back({c.path, t.name});
    }
    for (const KernelChoice& e : expanded) {
      const std::string why =
          kernel_refusal(e, Device::Cuda, o.dtype, o.head_dim, o.causal, dilated);
      if (!why.empty()) usage(why);
      runs.push_back(e);
    }
  }
  const bool has_naive = std::any_of(runs.begin(), runs.end(), [](const KernelChoice& c) {
    return c.path == "naive" && (c.tile.empty() || c.tile == "default");
  });
  if (o.check && !has_naive) runs.push_back({"naive", "default"});
  return runs;
}

template <typename T>
__global__ void fill_random(T* x, std::size_t n, std::uint64_t seed, float amp) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = float(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    x[i] = T(amp * (2.f * u - 1.f));
  }
}

void fill(void* p, std::size_t n, DType t, std::uint64_t seed, float amp = 1.f) {
  switch (t) {
    case DType::F32:
      fill_random<<<1024, 256>>>(static_cast<float*>(p), n, seed, amp);
      break;
    case DType::F16:
      fill_random<<<1024, 256>>>(static_cast<__half*>(p), n, seed, amp);
      break;
    case DType::BF16:
      fill_random<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p), n, seed, amp);
      break;
  }
  RBK_LAUNCH_CHECK();
}

struct DevBuf {
  void* p = nullptr;
  std::size_t bytes = 0;
  explicit DevBuf(std::size_t b) : bytes(b) { RBK_CUDA_CHECK(cudaMalloc(&p, b)); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  float* f() const { return static_cast<float*>(p); }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Errors {
  double max_abs = 0, rel_fro = 0;
};

Errors compare(const DevBuf& a, const DevBuf& ref) {
  const std::size_t n = a.bytes / 4;
  std::vector<float> x(n), y(n);
  RBK_CUDA_CHECK(cudaMemcpy(x.data(), a.p, a.bytes, cudaMemcpyDeviceToHost));
  RBK_CUDA_CHECK(cudaMemcpy(y.data(), ref.p, ref.bytes, cudaMemcpyDeviceToHost));
  Errors e;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = double(x[i]) - double(y[i]);
    if (!std::isfinite(x[i])) {
      e.max_abs = INFINITY;
      continue;
    }
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    num += d * d;
    den += double(y[i]) * double(y[i]);
  }
  e.rel_fro = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (!std::isfinite(e.max_abs)) e.rel_fro = INFINITY;
  return e;
}

// The block pair every kernel path runs: inputs filled once, shared by all runs.
struct Problem {
  Options o;
  Dims dims;
  std::size_t n_in, rows;
  DevBuf q, k, v, dout;
  Span span;
  Pattern pattern;
  float scale;
  double fwd_flops;

  explicit Problem(const Options& opt)
      : o(opt),
        n_in(std::size_t(opt.batch) * opt.heads * opt.seq * opt.head_dim),
        rows(std::size_t(opt.batch) * opt.heads * opt.seq),
        q(n_in * dtype_size(opt.dtype)),
        k(q.bytes),
        v(q.bytes),
        dout(q.bytes),
        span{0, opt.seq, 0, 1},
        scale(1.0f / std::sqrt(float(opt.head_dim))) {
    dims.batch = o.batch;
    dims.heads = o.heads;
    dims.head_dim = o.head_dim;
    dims.q_rows = dims.kv_rows = o.seq;
    pattern.causal = o.causal;
    pattern.segment = o.segment;
    pattern.rate = o.rate;
    fwd_flops = 4.0 * o.batch * o.heads * double(o.seq) * double(o.seq) * o.head_dim;
    if (o.causal) fwd_flops *= 0.5;
    if (o.segment > 0) fwd_flops *= double(o.segment) / double(o.seq) / double(o.rate * o.rate);
    fill(q.p, n_in, o.dtype, 1);
    fill(k.p, n_in, o.dtype, 2);
    fill(v.p, n_in, o.dtype, 3);
    fill(dout.p, n_in, o.dtype, 4);
    RBK_CUDA_CHECK(
        cudaDeviceSynchronize());  // filled on the default stream; backends use their own
  }
};

struct Result {
  KernelChoice choice;
  double fwd_ms = 0, bwd_ms = 0;
  std::int64_t fallbacks = 0;
  DevBuf out, lse, dq, dk, dv;
  Result(const KernelChoice& c, const Problem& p)
      : choice(c),
        out(p.n_in * 4),
        lse(p.rows * 4),
        dq(p.n_in * 4),
        dk(p.n_in * 4),
        dv(p.n_in * 4) {}
  std::string label() const {
    return choice.tile == "default" ? choice.path : choice.path + ":" + choice.tile;
  }
  bool is_reference() const { return label() == "naive"; }
};

// Median milliseconds of `body` between two marks of the backend's stream, `prepare` untimed.
double time_ms(AttentionBackend& be, const Options& o, const std::function<void()>& prepare,
               const std::function<void()>& body) {
  std::vector<double> t;
  for (int i = 0; i < o.warmup + o.repeats; ++i) {
    be.reset_marks();
    prepare();
    const int m0 = be.mark();
    body();
    const int m1 = be.mark();
    const double s = be.seconds_between(m0, m1);
    if (i >= o.warmup) t.push_back(s * 1e3);
  }
  return median(t);
}

std::unique_ptr<Result> run_choice(const Problem& p, const KernelChoice& choice) {
  auto r = std::make_unique<Result>(choice, p);
  gpu::CudaBackend be(choice);
  BlockInputs in;
  in.dims = p.dims;
  in.dtype = p.o.dtype;
  in.scale = p.scale;
  in.q = in.kv = p.span;
  in.pattern = p.pattern;
  in.q_data = p.q.p;
  in.k_data = p.k.p;
  in.v_data = p.v.p;
  ForwardBlock fb{in};
  fb.out = r->out.f();
  fb.lse = r->lse.f();
  r->fwd_ms = time_ms(
      be, p.o, [&] { be.init_forward(fb.out, fb.lse, std::int64_t(p.rows), p.o.head_dim); },
      [&] { be.forward(fb); });
  if (p.o.backward) {
    DevBuf delta(p.rows * 4);
    // As the ring does: delta (and the cudnn path's O copy) once per dO.
    be.backward_prepare(p.dout.p, fb.out, delta.f(), std::int64_t(p.rows), p.o.head_dim, p.o.dtype);
    BackwardBlock bb{in};
    bb.dout = p.dout.p;
    bb.lse = fb.lse;
    bb.delta = delta.f();
    bb.dq = r->dq.f();
    bb.dk = r->dk.f();
    bb.dv = r->dv.f();
    r->bwd_ms = time_ms(
        be, p.o,
        [&] {
          for (float* g : {bb.dq, bb.dk, bb.dv}) be.fill_zero(g, p.n_in * 4);
        },
        [&] { be.backward(bb); });
  }
  be.synchronize();
  r->fallbacks = be.cudnn_fallback_blocks();
  return r;
}

void print_results(const Problem& p, const std::vector<std::unique_ptr<Result>>& results,
                   const std::vector<KernelChoice>& asked) {
  const Result* ref = nullptr;
  for (auto& r : results)
    if (r->is_reference()) ref = r.get();
  std::printf("%-24s %10s %12s %10s %12s %14s %12s %12s\n", "kernel", "fwd_ms", "fwd_TFLOPs",
              "bwd_ms", "bwd_TFLOPs", "fwdbwd_TFLOPs", "out_relerr", "grad_relerr");
  for (auto& r : results) {
    // The reference added for the check is not reported unless asked for.
    if (r->is_reference() && std::none_of(asked.begin(), asked.end(),
                                          [](const KernelChoice& c) { return c.path == "naive"; }))
      continue;
    const double ft = p.fwd_flops / (r->fwd_ms * 1e-3) / 1e12;
    const double bt = p.o.backward ? 2.5 * p.fwd_flops / (r->bwd_ms * 1e-3) / 1e12 : 0;
    const double fbt =
        p.o.backward ? 3.5 * p.fwd_flops / ((r->fwd_ms + r->bwd_ms) * 1e-3) / 1e12 : 0;
    double oe = -1, ge = -1;
    if (ref && ref != r.get()) {
      oe = compare(r->out, ref->out).rel_fro;
      if (p.o.backward)
        ge = std::max({compare(r->dq, ref->dq).rel_fro, compare(r->dk, ref->dk).rel_fro,
                       compare(r->dv, ref->dv).rel_fro});
    }
    std::printf("%-24s %10.3f %12.1f %10.3f %12.1f %14.1f %12.3g %12.3g\n", r->label().c_str(),
                r->fwd_ms, ft, r->bwd_ms, bt, fbt, oe, ge);
    if (r->fallbacks > 0)
      std::printf(
          "# %s: %lld block calls ran on the flash kernels (shape/pattern cuDNN cannot take)\n",
          r->label().c_str(), (long long)r->fallbacks);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const std::vector<KernelChoice> runs = runs_of(o);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe even if a later step fails
  int dev = 0;
  RBK_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  RBK_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf(
      "# device %s (%d SMs), b=%d h=%d S=%lld d=%d dtype=%s causal=%d segment=%lld rate=%lld "
      "repeats=%d warmup=%d\n",
      prop.name, prop.multiProcessorCount, o.batch, o.heads, (long long)o.seq, o.head_dim,
      o.dtype == DType::BF16  ? "bf16"
      : o.dtype == DType::F16 ? "fp16"
                              : "fp32",
      o.causal, (long long)o.segment, (long long)o.rate, o.repeats, o.warmup);
  std::printf("#");
  for (const auto& [lib, version] : gpu::library_versions())
    std::printf(" %s %s;", lib.c_str(), version.c_str());
  std::printf("\n");

  const Problem p(o);
  std::vector<std::unique_ptr<Result>> results;
  for (const KernelChoice& c : runs) results.push_back(run_choice(p, c));
  print_results(p, results, o.kernels);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ringbench_kernel_bench: %s\n", e.what());
  return 1;
}
