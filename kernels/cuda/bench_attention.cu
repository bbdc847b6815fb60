// ringbench_kernel_bench: times one block pair (Sq = Sk = S) forward and backward per CUDA
// kernel path with CUDA events (warm-up, N repeats, median) and prints TFLOP/s by the
// FlashAttention convention (forward 4*b*h*S*S*d, halved when causal; backward 2.5x the
// forward) and the error of each path against the naive (cuBLAS) path.
// Builds with plain nvcc (see launch/bench_kernels.sh); no MPI.
//
//   ringbench_kernel_bench --seq 32768 --heads 16 --head-dim 128 --dtype bf16 [--causal]
//       [--batch 1] [--kernels flash,naive] [--repeats 10] [--warmup 3] [--no-backward]
//       [--no-check] [--segment W --rate R]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "attention_cuda.hpp"
#ifdef RINGBENCH_HAVE_CUDNN
#include "cudnn_attention.hpp"
#endif
#include "check.hpp"

using namespace rb::attn;

namespace {

struct Options {
  std::int64_t seq = 4096;
  int heads = 16, head_dim = 128, batch = 1;
  DType dtype = DType::BF16;
  bool causal = false, backward = true, check = true;
  std::int64_t segment = 0, rate = 1;
  int repeats = 10, warmup = 3;
#ifdef RINGBENCH_HAVE_CUDNN
  std::vector<std::string> kernels{"flash", "cudnn", "naive"};
#else
  std::vector<std::string> kernels{"flash", "naive"};
#endif
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "ringbench_kernel_bench: %s\n", msg);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--seq") o.seq = std::stoll(next());
    else if (a == "--heads") o.heads = std::stoi(next());
    else if (a == "--head-dim") o.head_dim = std::stoi(next());
    else if (a == "--batch") o.batch = std::stoi(next());
    else if (a == "--dtype") {
      const std::string t = next();
      if (t == "bf16") o.dtype = DType::BF16;
      else if (t == "fp16") o.dtype = DType::F16;
      else if (t == "fp32") o.dtype = DType::F32;
      else usage("dtype must be bf16, fp16 or fp32");
    } else if (a == "--causal") o.causal = true;
    else if (a == "--no-backward") o.backward = false;
    else if (a == "--no-check") o.check = false;
    else if (a == "--segment") o.segment = std::stoll(next());
    else if (a == "--rate") o.rate = std::stoll(next());
    else if (a == "--repeats") o.repeats = std::stoi(next());
    else if (a == "--warmup") o.warmup = std::stoi(next());
    else if (a == "--kernels") {
      o.kernels.clear();
      std::stringstream ss(next());
      std::string k;
      while (std::getline(ss, k, ',')) o.kernels.push_back(k);
    } else usage(("unknown argument " + a).c_str());
  }
  return o;
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
    case DType::F32: fill_random<<<1024, 256>>>(static_cast<float*>(p), n, seed, amp); break;
    case DType::F16: fill_random<<<1024, 256>>>(static_cast<__half*>(p), n, seed, amp); break;
    case DType::BF16: fill_random<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p), n, seed, amp); break;
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
    if (!std::isfinite(x[i])) { e.max_abs = INFINITY; continue; }
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    num += d * d;
    den += double(y[i]) * double(y[i]);
  }
  e.rel_fro = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (!std::isfinite(e.max_abs)) e.rel_fro = INFINITY;
  return e;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe even if a later step fails
  int dev = 0;
  RBK_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  RBK_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  cudaStream_t stream;
  RBK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  Dims dims;
  dims.batch = o.batch;
  dims.heads = o.heads;
  dims.head_dim = o.head_dim;
  dims.q_rows = dims.kv_rows = o.seq;
  const std::size_t n_in = std::size_t(o.batch) * o.heads * o.seq * o.head_dim;
  const std::size_t rows = std::size_t(o.batch) * o.heads * o.seq;
  const std::size_t es = dtype_size(o.dtype);
  DevBuf q(n_in * es), k(n_in * es), v(n_in * es), dout(n_in * es);
  fill(q.p, n_in, o.dtype, 1);
  fill(k.p, n_in, o.dtype, 2);
  fill(v.p, n_in, o.dtype, 3);
  fill(dout.p, n_in, o.dtype, 4);

  Span span{0, o.seq, 0, 1};
  Pattern pat;
  pat.causal = o.causal;
  pat.segment = o.segment;
  pat.rate = o.rate;
  const float scale = 1.0f / std::sqrt(float(o.head_dim));
  double fwd_flops = 4.0 * o.batch * o.heads * double(o.seq) * double(o.seq) * o.head_dim;
  if (o.causal) fwd_flops *= 0.5;
  if (o.segment > 0) fwd_flops *= double(o.segment) / double(o.seq) / double(o.rate * o.rate);

  std::printf("# device %s (%d SMs), b=%d h=%d S=%lld d=%d dtype=%s causal=%d segment=%lld rate=%lld "
              "repeats=%d warmup=%d\n",
              prop.name, prop.multiProcessorCount, o.batch, o.heads, (long long)o.seq, o.head_dim,
              o.dtype == DType::BF16 ? "bf16" : o.dtype == DType::F16 ? "fp16" : "fp32", o.causal,
              (long long)o.segment, (long long)o.rate, o.repeats, o.warmup);

  gpu::NaiveAttention naive(
      stream, [](std::size_t n) { void* p; RBK_CUDA_CHECK(cudaMalloc(&p, n)); return p; },
      [](void* p) { RBK_CUDA_CHECK(cudaFree(p)); });

#ifdef RINGBENCH_HAVE_CUDNN
  // Its times include the merge of cuDNN's 16-bit block output into the fp32 accumulators
  // and the gradient additions: what the ring pays per block.
  gpu::CudnnAttention cudnn(
      stream, [](std::size_t n) { void* p; RBK_CUDA_CHECK(cudaMalloc(&p, n)); return p; },
      [](void* p) { RBK_CUDA_CHECK(cudaFree(p)); });
  DevBuf out_copy(n_in * es);
#endif

  struct Result {
    std::string kernel;
    double fwd_ms = 0, bwd_ms = 0;
    DevBuf out, lse, dq, dk, dv;
    Result(std::size_t ob, std::size_t lb, std::size_t ib)
        : out(ob), lse(lb), dq(ib), dk(ib), dv(ib) {}
  };
  std::vector<std::unique_ptr<Result>> results;
  DevBuf delta(rows * 4);
  cudaEvent_t e0, e1;
  RBK_CUDA_CHECK(cudaEventCreate(&e0));
  RBK_CUDA_CHECK(cudaEventCreate(&e1));

  std::vector<std::string> kernels = o.kernels;
  if (o.check && std::find(kernels.begin(), kernels.end(), "naive") == kernels.end())
    kernels.push_back("naive");
  for (const std::string& kname : kernels) {
    auto r = std::make_unique<Result>(n_in * 4, rows * 4, n_in * 4);
    r->kernel = kname;
    ForwardBlock fb;
    fb.dims = dims; fb.dtype = o.dtype; fb.scale = scale; fb.q = span; fb.kv = span;
    fb.pattern = pat; fb.q_data = q.p; fb.k_data = k.p; fb.v_data = v.p;
    fb.out = r->out.f(); fb.lse = r->lse.f();
    auto run_fwd = [&]() {
      if (kname == "flash") gpu::flash_forward(fb, stream);
      else if (kname == "simple") gpu::simple_forward(fb, stream);
      else if (kname == "naive") naive.forward(fb);
#ifdef RINGBENCH_HAVE_CUDNN
      else if (kname == "cudnn") cudnn.forward(fb);
#endif
      else throw std::runtime_error("kernel '" + kname + "' is not available in this benchmark");
    };
    std::vector<double> t;
    for (int i = 0; i < o.warmup + o.repeats; ++i) {
      gpu::init_forward(fb.out, fb.lse, std::int64_t(rows), o.head_dim, stream);
      RBK_CUDA_CHECK(cudaEventRecord(e0, stream));
      run_fwd();
      RBK_CUDA_CHECK(cudaEventRecord(e1, stream));
      RBK_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      RBK_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= o.warmup) t.push_back(ms);
    }
    r->fwd_ms = median(t);
    if (o.backward) {
      gpu::backward_prepare(dout.p, fb.out, delta.f(), std::int64_t(rows), o.head_dim, o.dtype, stream);
#ifdef RINGBENCH_HAVE_CUDNN
      if (kname == "cudnn") gpu::convert_from_float(out_copy.p, fb.out, n_in, o.dtype, stream);
#endif
      BackwardBlock bb;
      bb.dims = dims; bb.dtype = o.dtype; bb.scale = scale; bb.q = span; bb.kv = span;
      bb.pattern = pat; bb.q_data = q.p; bb.k_data = k.p; bb.v_data = v.p; bb.dout = dout.p;
      bb.lse = fb.lse; bb.delta = delta.f(); bb.dq = r->dq.f(); bb.dk = r->dk.f(); bb.dv = r->dv.f();
      t.clear();
      for (int i = 0; i < o.warmup + o.repeats; ++i) {
        RBK_CUDA_CHECK(cudaMemsetAsync(bb.dq, 0, n_in * 4, stream));
        RBK_CUDA_CHECK(cudaMemsetAsync(bb.dk, 0, n_in * 4, stream));
        RBK_CUDA_CHECK(cudaMemsetAsync(bb.dv, 0, n_in * 4, stream));
        RBK_CUDA_CHECK(cudaEventRecord(e0, stream));
        if (kname == "flash") gpu::flash_backward(bb, stream);
        else if (kname == "simple") gpu::simple_backward(bb, stream);
#ifdef RINGBENCH_HAVE_CUDNN
        else if (kname == "cudnn") cudnn.backward(bb, out_copy.p);
#endif
        else naive.backward(bb);
        RBK_CUDA_CHECK(cudaEventRecord(e1, stream));
        RBK_CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        RBK_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= o.warmup) t.push_back(ms);
      }
      r->bwd_ms = median(t);
    }
    results.push_back(std::move(r));
  }

  const Result* ref = nullptr;
  for (auto& r : results)
    if (r->kernel == "naive") ref = r.get();
  std::printf("%-8s %10s %12s %10s %12s %14s %12s %12s\n", "kernel", "fwd_ms", "fwd_TFLOPs",
              "bwd_ms", "bwd_TFLOPs", "fwdbwd_TFLOPs", "out_relerr", "grad_relerr");
  for (auto& r : results) {
    if (std::find(o.kernels.begin(), o.kernels.end(), r->kernel) == o.kernels.end()) continue;
    const double ft = fwd_flops / (r->fwd_ms * 1e-3) / 1e12;
    const double bt = o.backward ? 2.5 * fwd_flops / (r->bwd_ms * 1e-3) / 1e12 : 0;
    const double fbt = o.backward ? 3.5 * fwd_flops / ((r->fwd_ms + r->bwd_ms) * 1e-3) / 1e12 : 0;
    double oe = -1, ge = -1;
    if (ref && ref != r.get()) {
      oe = compare(r->out, ref->out).rel_fro;
      if (o.backward)
        ge = std::max({compare(r->dq, ref->dq).rel_fro, compare(r->dk, ref->dk).rel_fro,
                       compare(r->dv, ref->dv).rel_fro});
    }
    std::printf("%-8s %10.3f %12.1f %10.3f %12.1f %14.1f %12.3g %12.3g\n", r->kernel.c_str(), r->fwd_ms,
                ft, r->bwd_ms, bt, fbt, oe, ge);
  }
#ifdef RINGBENCH_HAVE_CUDNN
  if (cudnn.fallback_blocks() > 0)
    std::printf("# cudnn: %lld block calls ran on the flash kernels (shape/pattern cuDNN cannot take)\n",
                (long long)cudnn.fallback_blocks());
#endif
  RBK_CUDA_CHECK(cudaStreamSynchronize(stream));
  return 0;  // the stream lives until exit: the cudnn path's destructor still uses it
} catch (const std::exception& e) {
  std::fprintf(stderr, "ringbench_kernel_bench: %s\n", e.what());
  return 1;
}
