#include "sweeps/contention/workloads.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <sstream>
#include <thread>

#include "host/host_backend.hpp"
#include "host/profiling_kernels.hpp"
#include "config/bytes.hpp"
#include "ring/inputs.hpp"
#include "ring/problem.hpp"

namespace rb::contention {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The workload names of the config and the compute engine's copy kind of each copy.
const std::vector<std::pair<std::string, std::string>>& copy_kinds() {
  static const std::vector<std::pair<std::string, std::string>> kinds = {
      {"d2d_copy", "d2d"},
      {"h2d_pinned", "h2d_pinned"},
      {"d2h_pinned", "d2h_pinned"},
      {"h2d_pageable", "h2d_pageable"},
      {"d2h_pageable", "d2h_pageable"}};
  return kinds;
}

std::string copy_kind(const std::string& workload) {
  for (const auto& [name, kind] : copy_kinds())
    if (name == workload) return kind;
  return "";
}

ring::Problem block_problem(const AttentionShape& a, std::int64_t rows) {
  ring::Problem pr;
  pr.batch = a.batch;
  pr.heads = a.heads;
  pr.head_dim = a.head_dim;
  pr.seq_len = rows;
  pr.causal = a.causal;
  pr.dtype = a.dtype;
  return pr;
}

// The buffers of one attention block in backend memory: Q, K, V, dO filled with the ring
// sweep's deterministic inputs (zeros would make the GPU draw less power than real data).
class BlockBuffers {
 public:
  BlockBuffers(attn::AttentionBackend& be, const ring::Problem& pr) : be_(be) {
    try {
      allocate(pr);
    } catch (...) {  // an out-of-memory half way must not leak what was allocated
      release_all();
      throw;
    }
  }
  ~BlockBuffers() { release_all(); }
  BlockBuffers(const BlockBuffers&) = delete;
  BlockBuffers& operator=(const BlockBuffers&) = delete;
  const void* input(int i) const { return held_[static_cast<std::size_t>(i)]; }  // Q K V dO
  float* grad(int i) const { return static_cast<float*>(held_[5 + static_cast<std::size_t>(i)]); }
  float* out = nullptr;
  float* lse = nullptr;
  float* delta = nullptr;

 private:
  void allocate(const ring::Problem& pr) {
    attn::AttentionBackend& be = be_;
    const auto elems = static_cast<std::size_t>(pr.shard_elements());
    const std::size_t in_bytes = elems * attn::dtype_size(pr.dtype);
    const auto rows = static_cast<std::size_t>(pr.batch) * static_cast<std::size_t>(pr.heads) *
                      static_cast<std::size_t>(pr.seq_len);
    for (auto t : {ring::Tensor::Q, ring::Tensor::K, ring::Tensor::V, ring::Tensor::dO}) {
      void* p = keep(be.allocate(in_bytes));
      const std::vector<unsigned char> host = ring::make_shard(pr, 0, 1234, t);
      be.copy_to_device(p, host.data(), in_bytes);
    }
    out = static_cast<float*>(keep(be.allocate(elems * sizeof(float))));
    for (int i = 0; i < 3; ++i) {  // dQ, dK, dV accumulate (+=): zero once, timing only
      keep(be.allocate(elems * sizeof(float)));
      be.fill_zero(held_.back(), elems * sizeof(float));
    }
    lse = static_cast<float*>(keep(be.allocate(rows * sizeof(float))));
    delta = static_cast<float*>(keep(be.allocate(rows * sizeof(float))));
  }
  void release_all() {
    for (void* p : held_) be_.release(p);
    held_.clear();
  }
  void* keep(void* p) {
    held_.push_back(p);
    return p;
  }
  attn::AttentionBackend& be_;
  std::vector<void*> held_;  // Q K V dO O dQ dK dV LSE delta
};

struct BlockCalls {
  attn::ForwardBlock fwd;
  attn::BackwardBlock bwd;
};

BlockCalls block_calls(const ring::Problem& pr, const BlockBuffers& b) {
  BlockCalls c;
  attn::Dims dims;
  dims.batch = pr.batch;
  dims.heads = pr.heads;
  dims.head_dim = pr.head_dim;
  dims.q_rows = dims.kv_rows = pr.seq_len;
  const attn::Span all{0, pr.seq_len, 0, 1};
  c.fwd.dims = c.bwd.dims = dims;
  c.fwd.dtype = c.bwd.dtype = pr.dtype;
  c.fwd.scale = c.bwd.scale = pr.scale();
  c.fwd.q = c.bwd.q = c.fwd.kv = c.bwd.kv = all;
  c.fwd.pattern.causal = c.bwd.pattern.causal = pr.causal;
  c.fwd.q_data = c.bwd.q_data = b.input(0);
  c.fwd.k_data = c.bwd.k_data = b.input(1);
  c.fwd.v_data = c.bwd.v_data = b.input(2);
  c.fwd.out = b.out;
  c.fwd.lse = b.lse;
  c.bwd.dout = b.input(3);
  c.bwd.lse = b.lse;
  c.bwd.delta = b.delta;
  c.bwd.dq = b.grad(0);
  c.bwd.dk = b.grad(1);
  c.bwd.dv = b.grad(2);
  return c;
}

// Wall time of each (forward [+ backward]) pass including the launches and the final
// synchronisation: CPU contention delays launches, and that is part of what is measured.
Measurement attention_block(attn::AttentionBackend& be, const AttentionShape& a,
                            std::int64_t seq_len, int warmup, int iterations) {
  const ring::Problem pr = block_problem(a, seq_len);
  ring::check_problem(pr);
  const BlockBuffers buf(be, pr);
  const BlockCalls c = block_calls(pr, buf);
  const std::int64_t rows = static_cast<std::int64_t>(pr.batch) * pr.heads * pr.seq_len;
  Measurement m;
  for (int it = 0; it < warmup + iterations; ++it) {
    const auto t0 = Clock::now();
    be.init_forward(buf.out, buf.lse, rows, pr.head_dim);
    be.forward(c.fwd);
    if (a.backward) {
      be.backward_prepare(c.bwd.dout, buf.out, buf.delta, rows, pr.head_dim, pr.dtype);
      be.backward(c.bwd);
    }
    be.synchronize();
    if (it >= warmup) m.seconds.push_back(since(t0));
  }
  // FlashAttention's convention: 4 d FLOPs per attending pair forward, 2.5 x that backward.
  const double fwd = 4.0 * pr.head_dim * static_cast<double>(ring::pair_count(pr, 0, 0));
  m.flop = a.backward ? 3.5 * fwd : fwd;
  return m;
}

}  // namespace

const std::vector<std::string>& workload_names() {
  static const std::vector<std::string> names = {"attention",    "gemm",       "d2d_copy",
                                                 "h2d_pinned",   "d2h_pinned", "h2d_pageable",
                                                 "d2h_pageable", "triad",      "host_attention"};
  return names;
}

bool needs_gpu(const std::string& workload) {
  return workload != "triad" && workload != "host_attention";
}

Workloads::Workloads(const Params& p, const RunContext& ctx)
    : p_(p),
      paths_(ctx.paths),
      gpu_(ctx.backend == Backend::Cuda),
      engine_(prof::make_compute_engine(ctx.backend)) {}

Workloads::~Workloads() = default;

namespace {

template <class T>
std::string listed(const std::vector<T>& v) {
  std::string s;
  for (const auto& x : v) {
    std::ostringstream o;
    o << x;
    s += (s.empty() ? "" : "/") + o.str();
  }
  return s;
}

// The block's shape; `rows` and `kernel` as given (one value, or the list with slashes).
std::string block_shape(const AttentionShape& a, const std::string& rows,
                        const std::string& kernel) {
  return "batch " + std::to_string(a.batch) + ", heads " + std::to_string(a.heads) + ", head_dim " +
         std::to_string(a.head_dim) + ", rows " + rows + ", " + ring::to_string(a.dtype) +
         (a.causal ? ", causal" : "") + (a.backward ? ", forward+backward" : ", forward") + " (" +
         kernel + ")";
}

}  // namespace

std::string describe_workload(const Params& p, const std::string& w) {
  if (w == "attention")
    return "attention block on the GPU, " +
           block_shape(p.attention, listed(p.attention.rows), listed(p.attention.kernels));
  if (w == "host_attention")
    return "attention block on the host, " + block_shape(p.host_attention,
                                                         listed(p.host_attention.rows),
                                                         listed(p.host_attention.kernels));
  if (w == "gemm") return "GEMM " + p.gemm_dtype + " " + std::to_string(p.gemm_size) + "^3";
  if (w == "triad")
    return "host STREAM triad, " + format_bytes(static_cast<double>(p.triad_bytes)) + " per array";
  return w + ", " + format_bytes(static_cast<double>(p.copy_bytes));
}

std::string describe_item(const Params& p, const Item& it) {
  if (it.workload == "attention")
    return "attention block on the GPU, " +
           block_shape(p.attention, std::to_string(it.rows), it.path);
  if (it.workload == "host_attention")
    return "attention block on the host, " +
           block_shape(p.host_attention, std::to_string(it.rows), it.path);
  return describe_workload(p, it.workload);
}

Measurement Workloads::run(const Item& item, std::int64_t iterations) {
  try {
    return measure(item, static_cast<int>(p_.warmup), static_cast<int>(iterations));
  } catch (const std::exception& e) {
    Measurement m;
    m.error =
        item.workload +
        (item.path.empty() ? "" : " (" + item.path + ", rows " + std::to_string(item.rows) + ")") +
        ": " + e.what();
    return m;
  }
}

Measurement Workloads::measure(const Item& it, int warmup, int iterations) {
  const std::string& w = it.workload;
  Measurement m;
  if (w == "triad") {
    const auto r =
        prof::host::triad(static_cast<std::size_t>(p_.triad_bytes / 8), warmup, iterations);
    m.seconds = r.seconds;
    m.bytes = static_cast<double>(r.bytes_per_iteration);
    if (r.wrong > 0) m.error = "triad: " + std::to_string(r.wrong) + " wrong elements";
    return m;
  }
  if (w == "host_attention") {
    const auto be = attn::make_host_backend({it.path, "default"});
    return attention_block(*be, p_.host_attention, it.rows, warmup, iterations);
  }
  if (w == "attention") {
    const auto be = paths_.attention_backend({it.path, "default"});
    return attention_block(*be, p_.attention, it.rows, warmup, iterations);
  }
  if (w == "gemm") {
    const prof::Timing t = engine_->gemm(p_.gemm_dtype, p_.gemm_size, warmup, iterations);
    m.seconds = t.seconds;
    m.flop = t.flop;
    return m;
  }
  const std::string kind = copy_kind(w);
  if (kind.empty()) throw std::invalid_argument("unknown workload '" + w + "'");
  m.seconds = engine_->copy(kind, static_cast<std::size_t>(p_.copy_bytes), warmup, iterations);
  m.bytes = static_cast<double>(p_.copy_bytes);
  return m;
}

// ------------------------------------------------------------------------------ the feeder

namespace {

// A data loader's "decode": a few xorshift-multiply rounds over every word of the batch it
// just copied, so the feeder keeps a core's integer units busy as well as the memory bus.
void chew(std::uint64_t* words, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t x = words[i] | 1u;
    for (int r = 0; r < 4; ++r) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      x *= 0x9E3779B97F4A7C15ull;
    }
    words[i] = x;
  }
}

struct FeedBuffers {
  explicit FeedBuffers(std::size_t bytes)
      : src(bytes / 8 + 1, 0x5A5A5A5A5A5A5A5Aull), dst(bytes / 8 + 1, 0) {}
  std::vector<std::uint64_t> src, dst;  // pageable, like a loader's batches
  // One unit: copy a batch, then chew on it. Returns the bytes copied.
  double unit() {
    std::memcpy(dst.data(), src.data(), src.size() * 8);
    chew(dst.data(), dst.size());
    std::swap(src, dst);
    return static_cast<double>(src.size() * 8);
  }
};

}  // namespace

double feed_until(const FeederParams& f, prof::ComputeEngine* gpu,
                  const std::function<bool()>& stop) {
  std::atomic<bool> done{false};
  std::atomic<double> fed{0};
  auto add = [&fed](double b) {
    double cur = fed.load();
    while (!fed.compare_exchange_weak(cur, cur + b)) {
    }
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < f.threads; ++t)
    helpers.emplace_back([&] {
      FeedBuffers buf(static_cast<std::size_t>(f.copy_bytes));
      while (!done.load(std::memory_order_relaxed)) add(buf.unit());
    });
  // The calling thread feeds too and is the only one that asks MPI (MPI_THREAD_FUNNELED).
  // At least one unit: a point shorter than that still overlaps some load.
  FeedBuffers buf(static_cast<std::size_t>(f.copy_bytes));
  do {
    add(buf.unit());
    if (gpu != nullptr) {
      // Pageable host-to-device copies, as a loader without pinned memory sends its batches.
      gpu->copy("h2d_pageable", static_cast<std::size_t>(f.copy_bytes), 0, 4);
      add(4.0 * static_cast<double>(f.copy_bytes));
    }
  } while (!stop());
  done = true;
  for (auto& h : helpers) h.join();
  return fed.load();
}

// ------------------------------------------------------------------------------ waits

// Sleeps grow from 50 us to 5 ms: a short wait ends promptly, and a rank waiting through
// another rank's whole alone turn wakes ~200 times a second, not thousands.
void wait_quietly(MPI_Request& request) {
  int done = 0;
  auto nap = std::chrono::microseconds(50);
  for (;;) {
    RB_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(5000));
  }
}

void quiet_barrier(MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  RB_MPI_CHECK(MPI_Ibarrier(comm, &r));
  wait_quietly(r);
}

void sleep_s(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

}  // namespace rb::contention
