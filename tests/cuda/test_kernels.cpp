// GPU kernel parity: every built CUDA row of the kernel path table with each tile variant that
// applies (through CudaBackend, as the ring drives it), plus the kernels behind a row that a
// row alone does not reach (naive with a tiny workspace so it chunks, the flash row's
// CUDA-core kernel), against a double-precision host reference on fresh random data, with
// poisoned / random prior accumulators, several shapes (odd lengths, head dims 64/128/96),
// causal, dilated and strided spans, forward and backward.
// Needs only the CUDA runtime and kernels/cuda (no MPI): also built standalone on a GPU machine.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attention_cuda.hpp"
#include "check.hpp"
#include "cuda_backend.hpp"
#include "kernel_paths.hpp"
#include "reference.hpp"

using namespace rb::attn;

namespace {

struct Case {
  std::string name;
  DType dtype;
  int batch, heads, head_dim;
  std::int64_t q_rows, kv_rows;
  Span q, kv;
  Pattern pattern;
};

Pattern pat(bool causal, std::int64_t segment = 0, std::int64_t rate = 1) {
  Pattern p;
  p.causal = causal;
  p.segment = segment;
  p.rate = rate;
  return p;
}

std::vector<Case> cases() {
  return {
      {"exact bf16 d128",
       DType::BF16,
       1,
       2,
       128,
       192,
       192,
       {0, 192, 0, 1},
       {0, 192, 0, 1},
       pat(false)},
      {"causal bf16 d64 1000 rows",
       DType::BF16,
       1,
       1,
       64,
       1000,
       1000,
       {0, 1000, 0, 1},
       {0, 1000, 0, 1},
       pat(true)},
      {"causal fp16 d128 offset spans",
       DType::F16,
       2,
       2,
       128,
       130,
       200,
       {5, 120, 300, 1},
       {10, 180, 150, 1},
       pat(true)},
      {"causal bf16 d128 strided spans",
       DType::BF16,
       1,
       2,
       128,
       258,
       258,
       {0, 258, 1, 3},
       {0, 258, 0, 3},
       pat(true)},
      {"dilated bf16 d64",
       DType::BF16,
       1,
       4,
       64,
       300,
       300,
       {0, 300, 0, 1},
       {0, 300, 0, 1},
       pat(false, 64, 4)},
      {"dilated causal fp16 d128 stride 2",
       DType::F16,
       1,
       3,
       128,
       257,
       257,
       {0, 257, 2, 2},
       {0, 257, 0, 2},
       pat(true, 32, 4)},
      {"causal fp32 d96",
       DType::F32,
       1,
       2,
       96,
       150,
       150,
       {0, 150, 0, 1},
       {0, 150, 0, 1},
       pat(true)},
      {"dilated bf16 d96",
       DType::BF16,
       2,
       2,
       96,
       100,
       120,
       {0, 100, 0, 1},
       {0, 120, 0, 1},
       pat(false, 40, 2)},
      {"fully masked block fp16 d64",
       DType::F16,
       1,
       2,
       64,
       64,
       64,
       {0, 64, 0, 1},
       {0, 64, 1000, 1},
       pat(true)},
      {"one query row fp16 d64",
       DType::F16,
       1,
       2,
       64,
       3,
       77,
       {1, 1, 500, 1},
       {0, 77, 0, 7},
       pat(true)},
      {"fp32 d128 exact", DType::F32, 1, 1, 128, 70, 90, {0, 70, 0, 1}, {0, 90, 0, 1}, pat(false)},
  };
}

double tol_out(DType t) {
  return t == DType::BF16 ? 1e-2 : t == DType::F16 ? 4e-3 : 1e-4;
}
double tol_grad(DType t) {
  return t == DType::BF16 ? 2e-2 : t == DType::F16 ? 8e-3 : 1e-4;
}

double round_to(DType t, double x) {
  switch (t) {
    case DType::F32:
      return double(float(x));
    case DType::F16:
      return double(__half2float(__float2half(float(x))));
    case DType::BF16:
      return double(__bfloat162float(__float2bfloat16(float(x))));
  }
  return x;
}

std::vector<unsigned char> encode(const std::vector<double>& v, DType t) {
  std::vector<unsigned char> out(v.size() * dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::F32) {
      const float f = float(v[i]);
      std::memcpy(&out[i * 4], &f, 4);
    } else if (t == DType::F16) {
      const __half h = __float2half(float(v[i]));
      std::memcpy(&out[i * 2], &h, 2);
    } else {
      const __nv_bfloat16 h = __float2bfloat16(float(v[i]));
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

struct Dev {
  void* p = nullptr;
  std::size_t bytes = 0;
  explicit Dev(std::size_t b) : bytes(b ? b : 4) { RBK_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  template <typename V>
  explicit Dev(const std::vector<V>& host) : Dev(host.size() * sizeof(V)) {
    RBK_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(V), cudaMemcpyHostToDevice));
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  float* f() const { return static_cast<float*>(p); }
  std::vector<float> get(std::size_t n) const {
    std::vector<float> h(n);
    RBK_CUDA_CHECK(cudaMemcpy(h.data(), p, n * 4, cudaMemcpyDeviceToHost));
    return h;
  }
};

// One thing under test; every call has finished when it returns.
class Subject {
 public:
  virtual ~Subject() = default;
  virtual void forward(const ForwardBlock& b) = 0;
  // `out`: the block's final fp32 output (what the ring's backward_prepare gets).
  virtual void backward(const BackwardBlock& b, const float* out) = 0;
  // Blocks the cudnn path handed to the flash kernels.
  virtual std::int64_t fallbacks() const { return 0; }
};

// A row of the table with one of its tiles, through the backend the ring uses.
class PathSubject final : public Subject {
 public:
  explicit PathSubject(const KernelChoice& c) : be_(c) {}
  void forward(const ForwardBlock& b) override {
    be_.forward(b);
    be_.synchronize();
  }
  void backward(const BackwardBlock& b, const float* out) override {
    // backward_prepare also writes delta: into scratch, so the block keeps the reference's.
    const std::int64_t rows = std::int64_t(b.dims.batch) * b.dims.heads * b.dims.q_rows;
    auto* scratch = static_cast<float*>(be_.allocate(std::size_t(rows) * 4));
    be_.backward_prepare(b.dout, out, scratch, rows, b.dims.head_dim, b.dtype);
    be_.backward(b);
    be_.synchronize();
    be_.release(scratch);
  }
  std::int64_t fallbacks() const override { return be_.cudnn_fallback_blocks(); }

 private:
  gpu::CudaBackend be_;
};

// Kernels a row reaches only for some blocks: the chunked naive path, the CUDA-core kernel.
class KernelSubject final : public Subject {
 public:
  explicit KernelSubject(std::size_t naive_budget) : naive_budget_(naive_budget) { make_stream(); }
  KernelSubject() { make_stream(); }  // the CUDA-core kernel
  ~KernelSubject() override { cudaStreamDestroy(stream_); }
  void forward(const ForwardBlock& b) override {
    if (naive_budget_)
      naive().forward(b);
    else
      gpu::simple_forward(b, stream_);
    RBK_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void backward(const BackwardBlock& b, const float*) override {
    if (naive_budget_)
      naive().backward(b);
    else
      gpu::simple_backward(b, stream_);
    RBK_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  void make_stream() { RBK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  gpu::NaiveAttention& naive() {
    if (!naive_)
      naive_ = std::make_unique<gpu::NaiveAttention>(
          stream_,
          [](std::size_t n) {
            void* p;
            RBK_CUDA_CHECK(cudaMalloc(&p, n));
            return p;
          },
          [](void* p) { RBK_CUDA_CHECK(cudaFree(p)); }, naive_budget_);
    return *naive_;
  }
  std::size_t naive_budget_ = 0;
  cudaStream_t stream_{};
  std::unique_ptr<gpu::NaiveAttention> naive_;
};

struct SubjectKind {
  std::string label;
  std::function<std::unique_ptr<Subject>()> make;
  std::string path;  // the table row ("" for a kernel behind one)
  std::string tile;
};

// What a case runs on: every built CUDA row of the table with each tile variant that applies
// to the case, then the kernels behind the rows.
std::vector<SubjectKind> subjects_for(const Case& c) {
  std::vector<SubjectKind> out;
  const bool dilated = c.pattern.segment > 0;
  for (const KernelPath& row : kernel_paths()) {
    if (row.device != Device::Cuda || !row.built) continue;
    for (const TileVariant& t : row.tiles) {
      if (!t.applies.takes(c.dtype, c.head_dim, c.pattern.causal, dilated)) continue;
      const KernelChoice choice{row.name, t.name};
      out.push_back({std::string(row.name) + ":" + t.name,
                     [choice] { return std::make_unique<PathSubject>(choice); }, row.name, t.name});
    }
  }
  out.push_back({"naive-chunked",
                 [] { return std::make_unique<KernelSubject>(std::size_t(48) << 10); }, "", ""});
  out.push_back(
      {"flash's CUDA-core kernel", [] { return std::make_unique<KernelSubject>(); }, "", ""});
  return out;
}

// The cudnn row hands the blocks outside cuDNN's own range (its full-speed range, dilated
// shapes aside: cuDNN takes those itself) to the flash kernels, one per call here.
std::int64_t expected_fallbacks(const SubjectKind& s, const Case& c) {
  if (s.path != "cudnn") return 0;
  const KernelPath& row = *find_kernel_path("cudnn", Device::Cuda);
  return row.full_speed.takes(c.dtype, c.head_dim, c.pattern.causal, false) ? 0 : 1;
}

struct Inputs {
  rb::test::HostProblem hp;
  std::vector<unsigned char> q, k, v, dout;
};

Inputs make_inputs(const Case& c, std::mt19937_64& rng) {
  Inputs in;
  auto& hp = in.hp;
  hp.dims.batch = c.batch;
  hp.dims.heads = c.heads;
  hp.dims.head_dim = c.head_dim;
  hp.dims.q_rows = c.q_rows;
  hp.dims.kv_rows = c.kv_rows;
  hp.q = c.q;
  hp.kv = c.kv;
  hp.pattern = c.pattern;
  hp.scale = double(1.0f / std::sqrt(float(c.head_dim)));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  auto gen = [&](std::size_t n, std::vector<double>& x, double amp) {
    x.resize(n);
    for (auto& e : x) e = round_to(c.dtype, amp * u(rng));
  };
  const std::size_t nq = std::size_t(c.batch) * c.heads * c.q_rows * c.head_dim;
  const std::size_t nk = std::size_t(c.batch) * c.heads * c.kv_rows * c.head_dim;
  gen(nq, hp.Q, 2.0);  // larger scores than unit data: a peaked softmax tests the max handling
  gen(nk, hp.K, 2.0);
  gen(nk, hp.V, 1.0);
  gen(nq, hp.dO, 1.0);
  in.q = encode(hp.Q, c.dtype);
  in.k = encode(hp.K, c.dtype);
  in.v = encode(hp.V, c.dtype);
  in.dout = encode(hp.dO, c.dtype);
  return in;
}

bool in_span(const Span& s, std::int64_t row) {
  return row >= s.row0 && row < s.row0 + s.count;
}

// The fields a forward and a backward block share, for case `c` on these device inputs.
template <typename Block>
void describe(Block& b, const Case& c, const Inputs& in, const Dev& q, const Dev& k, const Dev& v) {
  b.dims = in.hp.dims;
  b.dtype = c.dtype;
  b.scale = float(in.hp.scale);
  b.q = c.q;
  b.kv = c.kv;
  b.pattern = c.pattern;
  b.q_data = q.p;
  b.k_data = k.p;
  b.v_data = v.p;
}

void check_forward(const SubjectKind& s, const Case& c, std::uint64_t seed) {
  INFO(c.name << " [" << s.label << "] seed " << seed);
  std::mt19937_64 rng(seed);
  Inputs in = make_inputs(c, rng);
  const int bhn = c.batch * c.heads, d = c.head_dim;
  const std::size_t rows = std::size_t(bhn) * c.q_rows;
  // Prior running state: half the rows already hold a result, the others are fresh.
  std::vector<float> out0(rows * d), lse0(rows);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::size_t r = 0; r < rows; ++r) {
    const bool fresh = r % 2 == 1;
    lse0[r] = fresh ? -INFINITY : 2.f * u(rng) + 1.f;
    for (int e = 0; e < d; ++e) out0[r * d + e] = fresh ? 0.f : u(rng);
  }
  Dev q(in.q), k(in.k), v(in.v), out(out0), lse(lse0);
  ForwardBlock b;
  describe(b, c, in, q, k, v);
  b.out = out.f();
  b.lse = lse.f();
  auto subject = s.make();
  subject->forward(b);
  CHECK(subject->fallbacks() == expected_fallbacks(s, c));
  const std::vector<float> got = out.get(rows * d), got_lse = lse.get(rows);

  std::vector<double> ob, lb;
  in.hp.forward(ob, lb);
  double num = 0, den = 0, lse_err = 0;
  std::size_t untouched_changed = 0, nonfinite = 0;
  for (int bh = 0; bh < bhn; ++bh)
    for (std::int64_t row = 0; row < c.q_rows; ++row) {
      const std::size_t r = std::size_t(bh) * c.q_rows + row;
      if (!in_span(c.q, row)) {
        if (std::memcmp(&got_lse[r], &lse0[r], 4) != 0 ||
            std::memcmp(&got[r * d], &out0[r * d], std::size_t(d) * 4) != 0)
          ++untouched_changed;
        continue;
      }
      const std::size_t bi = std::size_t(bh) * c.q.count + (row - c.q.row0);
      const double lo = lse0[r], lbk = lb[bi];
      double ln = lo, wo = 1, wb = 0;
      if (lbk != -INFINITY) {
        const double m = std::max(lo, lbk);
        ln = m + std::log(std::exp(lo - m) + std::exp(lbk - m));
        wo = std::exp(lo - ln);
        wb = std::exp(lbk - ln);
      }
      if (ln == -INFINITY) {
        if (got_lse[r] != -INFINITY) lse_err = INFINITY;
      } else {
        lse_err = std::max(lse_err, std::fabs(double(got_lse[r]) - ln));
      }
      for (int e = 0; e < d; ++e) {
        const double want = wo * out0[r * d + e] + wb * ob[bi * d + e];
        const double g = got[r * d + e];
        if (!std::isfinite(g)) ++nonfinite;
        num += (g - want) * (g - want);
        den += want * want;
      }
    }
  const double rel = std::sqrt(num / std::max(den, 1e-30));
  CHECK(nonfinite == 0);
  CHECK(untouched_changed == 0);
  CHECK(lse_err < 2e-3);
  CHECK(rel < tol_out(c.dtype));
  MESSAGE(c.name << " [" << s.label << "] forward: rel err " << rel << ", lse err " << lse_err);
}

void check_backward(const SubjectKind& s, const Case& c, std::uint64_t seed) {
  INFO(c.name << " [" << s.label << "] seed " << seed);
  std::mt19937_64 rng(seed);
  Inputs in = make_inputs(c, rng);
  const int bhn = c.batch * c.heads, d = c.head_dim;
  std::vector<double> ob, lb;
  in.hp.forward(ob, lb);
  // lse and delta of the span's rows; rows outside the span hold NaN, which no kernel may read.
  std::vector<float> lse_f(std::size_t(bhn) * c.q_rows, NAN), delta_f(lse_f.size(), NAN);
  std::vector<double> delta_b(lb.size(), 0.0);
  for (int bh = 0; bh < bhn; ++bh)
    for (std::int64_t i = 0; i < c.q.count; ++i) {
      const std::size_t bi = std::size_t(bh) * c.q.count + i;
      double dl = 0;
      for (int e = 0; e < d; ++e) dl += in.hp.dO[in.hp.qi(bh, c.q.row0 + i, e)] * ob[bi * d + e];
      // The kernels get fp32 lse / delta: the reference uses those rounded values too.
      lb[bi] = double(float(lb[bi]));
      delta_b[bi] = double(float(dl));
      const std::size_t r = std::size_t(bh) * c.q_rows + c.q.row0 + i;
      lse_f[r] = float(lb[bi]);
      delta_f[r] = float(dl);
    }
  std::vector<double> rdq, rdk, rdv;
  in.hp.backward(lb, delta_b, rdq, rdk, rdv);

  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto prior = [&](std::size_t n) {
    std::vector<float> x(n);
    for (auto& e : x) e = u(rng);
    return x;
  };
  const std::vector<float> dq0 = prior(rdq.size()), dk0 = prior(rdk.size()),
                           dv0 = prior(rdv.size());
  Dev q(in.q), k(in.k), v(in.v), dout(in.dout), lse(lse_f), delta(delta_f), dq(dq0), dk(dk0),
      dv(dv0);
  BackwardBlock b;
  describe(b, c, in, q, k, v);
  b.dout = dout.p;
  b.lse = lse.f();
  b.delta = delta.f();
  b.dq = dq.f();
  b.dk = dk.f();
  b.dv = dv.f();
  // The block output the delta above came from, as the final fp32 output (the cudnn path
  // recomputes delta from O; rows outside the span hold zeros).
  std::vector<float> o_full(std::size_t(bhn) * c.q_rows * d, 0.f);
  for (int bh = 0; bh < bhn; ++bh)
    for (std::int64_t i = 0; i < c.q.count; ++i)
      for (int e = 0; e < d; ++e)
        o_full[(std::size_t(bh) * c.q_rows + c.q.row0 + i) * d + e] =
            float(ob[(std::size_t(bh) * c.q.count + i) * d + e]);
  Dev o_dev(o_full);
  auto subject = s.make();
  subject->backward(b, o_dev.f());
  CHECK(subject->fallbacks() == expected_fallbacks(s, c));

  auto compare = [&](const char* what, const Dev& dev, const std::vector<float>& p0,
                     const std::vector<double>& ref, std::int64_t rows_per_head, const Span& span) {
    const std::vector<float> got = dev.get(ref.size());
    double num = 0, den = 0;
    std::size_t untouched_changed = 0, nonfinite = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const std::int64_t row = std::int64_t(i / d) % rows_per_head;
      if (!in_span(span, row)) {
        if (std::memcmp(&got[i], &p0[i], 4) != 0) ++untouched_changed;
        continue;
      }
      if (!std::isfinite(got[i])) ++nonfinite;
      const double inc = double(got[i]) - double(p0[i]);
      num += (inc - ref[i]) * (inc - ref[i]);
      den += ref[i] * ref[i];
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    CAPTURE(what);
    CHECK(nonfinite == 0);
    CHECK(untouched_changed == 0);
    CHECK(rel < tol_grad(c.dtype));
    return rel;
  };
  const double eq = compare("dq", dq, dq0, rdq, c.q_rows, c.q);
  const double ek = compare("dk", dk, dk0, rdk, c.kv_rows, c.kv);
  const double ev = compare("dv", dv, dv0, rdv, c.kv_rows, c.kv);
  MESSAGE(c.name << " [" << s.label << "] backward: rel err dq " << eq << " dk " << ek << " dv "
                 << ev);
}

std::uint64_t fresh_seed() {
  return (std::uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
}

}  // namespace

TEST_CASE("CUDA attention forward matches the double-precision reference on every path and tile") {
  for (const Case& c : cases())
    for (const SubjectKind& s : subjects_for(c)) check_forward(s, c, fresh_seed());
}

TEST_CASE("CUDA attention backward matches the double-precision reference on every path and tile") {
  for (const Case& c : cases())
    for (const SubjectKind& s : subjects_for(c)) check_backward(s, c, fresh_seed());
}

TEST_CASE("CUDA init_forward and backward_prepare") {
  const std::int64_t rows = 37;
  const int d = 80;
  std::mt19937_64 rng(fresh_seed());
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<float> poison(rows * d, 7.f), o(rows * d);
  std::vector<double> dout(rows * d);
  for (auto& x : o) x = float(u(rng));
  for (auto& x : dout) x = round_to(DType::BF16, u(rng));
  Dev out(poison), lse(std::vector<float>(rows, 7.f));
  gpu::init_forward(out.f(), lse.f(), rows, d, nullptr);
  RBK_CUDA_CHECK(cudaDeviceSynchronize());
  for (float x : out.get(rows * d)) REQUIRE(x == 0.f);
  for (float x : lse.get(rows)) REQUIRE(x == -INFINITY);

  Dev dd(encode(dout, DType::BF16)), oo(o), delta(std::vector<float>(rows, NAN));
  gpu::backward_prepare(dd.p, oo.f(), delta.f(), rows, d, DType::BF16, nullptr);
  RBK_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = delta.get(rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    double want = 0;
    for (int e = 0; e < d; ++e) want += dout[r * d + e] * o[r * d + e];
    CHECK(std::fabs(got[r] - want) < 1e-4 * (1 + std::fabs(want)));
  }
}
