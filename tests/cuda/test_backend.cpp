// The GPU AttentionBackend: memory, OOM, copies, marks, kernel dispatch. No MPI needed: the
// full build goes through the factory, the standalone nvcc build constructs it directly.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_backend.hpp"
#include "kernel_paths.hpp"

using namespace rb;

namespace {

std::unique_ptr<attn::AttentionBackend> make_backend(const std::string& kernel,
                                                     const std::string& tile = "default") {
  return attn::gpu::make_cuda_backend(attn::KernelChoice{kernel, tile});
}

bool cudnn_built() {
  const attn::KernelPath* row = attn::find_kernel_path("cudnn", attn::Device::Cuda);
  return row && row->built;
}

std::mt19937_64 rng_fresh() {
  return std::mt19937_64((std::uint64_t(std::random_device{}()) << 32) ^ std::random_device{}());
}

std::vector<__nv_bfloat16> random_bf16(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = __float2bfloat16(u(rng));
  return v;
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Forward and backward of one bf16 block through a backend; returns out, then dq|dk|dv.
struct BlockResult {
  std::vector<float> out, grads;
  double fwd_seconds = 0;
};

BlockResult run_block(attn::AttentionBackend& be, std::uint64_t seed, std::int64_t q_first = 100,
                      std::int64_t kv_first = 0) {
  std::mt19937_64 rng(seed);
  const attn::Dims d{1, 2, 64, 200, 150};  // batch, heads, head_dim, q rows, kv rows
  const std::size_t nq = std::size_t(d.heads) * d.q_rows * d.head_dim;
  const std::size_t nk = std::size_t(d.heads) * d.kv_rows * d.head_dim;
  const auto hq = random_bf16(nq, rng), hk = random_bf16(nk, rng), hv = random_bf16(nk, rng),
             hdo = random_bf16(nq, rng);
  auto up = [&](const std::vector<__nv_bfloat16>& h) {
    void* p = be.allocate(h.size() * 2);
    be.copy_to_device(p, h.data(), h.size() * 2);
    return p;
  };
  void *q = up(hq), *k = up(hk), *v = up(hv), *dout = up(hdo);
  auto* out = static_cast<float*>(be.allocate(nq * 4));
  auto* lse = static_cast<float*>(be.allocate(std::size_t(d.heads) * d.q_rows * 4));
  auto* delta = static_cast<float*>(be.allocate(std::size_t(d.heads) * d.q_rows * 4));
  auto* dq = static_cast<float*>(be.allocate(nq * 4));
  auto* dk = static_cast<float*>(be.allocate(nk * 4));
  auto* dv = static_cast<float*>(be.allocate(nk * 4));
  be.init_forward(out, lse, std::int64_t(d.heads) * d.q_rows, d.head_dim);
  const attn::Pattern causal{true};
  const attn::Span qs{0, 200, q_first, 1}, ks{0, 150, kv_first, 1};
  const attn::BlockInputs in{d, attn::DType::BF16, 0.125f, qs, ks, causal, q, k, v};
  const attn::ForwardBlock f{in, out, lse};
  be.reset_marks();
  const int m0 = be.mark();
  be.forward(f);
  const int m1 = be.mark();
  BlockResult r;
  r.fwd_seconds = be.seconds_between(m0, m1);
  be.backward_prepare(dout, out, delta, std::int64_t(d.heads) * d.q_rows, d.head_dim, f.dtype);
  be.fill_zero(dq, nq * 4);
  be.fill_zero(dk, nk * 4);
  be.fill_zero(dv, nk * 4);
  be.backward(attn::BackwardBlock{in, dout, lse, delta, dq, dk, dv});
  r.out.resize(nq);
  be.copy_to_host(r.out.data(), out, nq * 4);
  r.grads.resize(nq + 2 * nk);
  be.copy_to_host(r.grads.data(), dq, nq * 4);
  be.copy_to_host(r.grads.data() + nq, dk, nk * 4);
  be.copy_to_host(r.grads.data() + nq + nk, dv, nk * 4);
  for (void* p : {q, k, v, dout}) be.release(p);
  for (float* p : {out, lse, delta, dq, dk, dv}) be.release(p);
  return r;
}

}  // namespace

TEST_SUITE("cuda backend") {
  TEST_CASE("every CUDA row of the table makes a backend of its name; unbuilt ones fail clearly") {
    for (const attn::KernelPath& row : attn::kernel_paths()) {
      if (row.device != attn::Device::Cuda) continue;
      CAPTURE(row.name);
      if (!row.built) {
        try {
          make_backend(row.name);
          FAIL("a path this build lacks made a backend");
        } catch (const std::runtime_error& e) {
          CHECK(std::string(e.what()).find(row.missing) != std::string::npos);
        }
        continue;
      }
      for (const attn::TileVariant& tile : row.tiles) {
        CAPTURE(tile.name);
        auto be = make_backend(row.name, tile.name);
        CHECK(be->name() == row.name);
        CHECK(be->on_device());
        CHECK(be->stream() != nullptr);
      }
      CHECK_THROWS_AS(make_backend(row.name, "no-such-tile"), std::invalid_argument);
    }
    CHECK(make_backend("auto")->name() == attn::auto_headline_path(attn::Device::Cuda)->name);
    CHECK_THROWS_AS(make_backend("auto", "fwd-4w2m-k32"), std::invalid_argument);
    CHECK_THROWS_AS(make_backend("fast"), std::invalid_argument);
  }

  TEST_CASE("allocation is tracked, peak is a high-water mark, OOM says asked and free") {
    auto be = make_backend("flash");
    void* a = be->allocate(1 << 20);
    void* b = be->allocate(3 << 20);
    CHECK(be->peak_bytes() >= (4u << 20));
    be->release(a);
    CHECK(be->peak_bytes() >= (4u << 20));
    be->reset_peak();
    CHECK(be->peak_bytes() == (3u << 20));
    const std::size_t huge = std::size_t(1) << 50;  // 1 PiB: no GPU has it
    try {
      be->allocate(huge);
      FAIL("a 1 PiB allocation succeeded");
    } catch (const attn::OutOfMemory& e) {
      std::size_t free_b = 0, total_b = 0;
      REQUIRE(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
      CHECK(e.requested() == huge);
      CHECK(e.free_bytes() > 0);
      CHECK(e.free_bytes() <= total_b);
    }
    // The failed allocation leaves the backend and the CUDA context usable.
    void* c = be->allocate(1 << 10);
    CHECK(c != nullptr);
    CHECK(be->peak_bytes() == (3u << 20) + (1u << 10));
    be->release(b);
    be->release(c);
  }

  TEST_CASE("copies, fill_zero and accumulate (odd count, unaligned) on the compute stream") {
    auto be = make_backend("naive");
    auto rng = rng_fresh();
    std::uniform_real_distribution<float> u(-5.f, 5.f);
    const std::size_t n = 1001;
    std::vector<float> x(n + 1), y(n + 1);
    for (auto& e : x) e = u(rng);
    for (auto& e : y) e = u(rng);
    auto* dx = static_cast<float*>(be->allocate((n + 1) * 4));
    auto* dy = static_cast<float*>(be->allocate((n + 1) * 4));
    auto* dz = static_cast<float*>(be->allocate((n + 1) * 4));
    be->copy_to_device(dx, x.data(), (n + 1) * 4);
    be->copy_to_device(dy, y.data(), (n + 1) * 4);
    be->copy(dz, dx, (n + 1) * 4);
    be->accumulate(dz + 1, dy, n);  // 4-byte offset: the scalar path
    be->accumulate(dx, dy, n + 1);  // aligned: the vector path with a tail
    std::vector<float> z(n + 1), w(n + 1);
    be->copy_to_host(z.data(), dz, (n + 1) * 4);
    be->copy_to_host(w.data(), dx, (n + 1) * 4);
    CHECK(z[0] == x[0]);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(z[i + 1] == x[i + 1] + y[i]);
    for (std::size_t i = 0; i <= n; ++i) REQUIRE(w[i] == x[i] + y[i]);
    be->fill_zero(dz, (n + 1) * 4);
    be->copy_to_host(z.data(), dz, (n + 1) * 4);
    for (float e : z) REQUIRE(e == 0.f);
    be->release(dx);
    be->release(dy);
    be->release(dz);
  }

  TEST_CASE(
      "every built CUDA path and tile agrees with naive on a causal bf16 block; marks time it") {
    const std::uint64_t seed = rng_fresh()();
    CAPTURE(seed);
    auto naive = make_backend("naive");
    const BlockResult ref = run_block(*naive, seed);
    CHECK(ref.fwd_seconds > 0);
    for (const attn::KernelPath& row : attn::kernel_paths()) {
      if (row.device != attn::Device::Cuda || !row.built) continue;
      for (const attn::TileVariant& tile : row.tiles) {
        if (!tile.applies.takes(attn::DType::BF16, 64, true, false)) continue;
        CAPTURE(row.name);
        CAPTURE(tile.name);
        auto be = make_backend(row.name, tile.name);
        const BlockResult got = run_block(*be, seed);
        CHECK(rel_err(got.out, ref.out) < 1e-2);
        CHECK(rel_err(got.grads, ref.grads) < 2e-2);
        CHECK(got.fwd_seconds > 0);
      }
    }
    // The naive path's scratch is backend memory: it shows in the high-water mark.
    auto flash = make_backend("flash");
    run_block(*flash, seed);
    CHECK(naive->peak_bytes() > flash->peak_bytes());
  }

  TEST_CASE("cudnn and naive backends agree on causal bf16 blocks split two ways") {
    if (!cudnn_built()) {
      MESSAGE("this build has no cuDNN: the cudnn path is not built");
      return;
    }
    const std::uint64_t seed = rng_fresh()();
    CAPTURE(seed);
    // Keys before the queries (a full piece and a causal piece), then queries partly before
    // the keys (a causal piece with leading query rows that see nothing).
    for (const auto& firsts : {std::pair<std::int64_t, std::int64_t>{100, 0}, {0, 50}}) {
      CAPTURE(firsts.first);
      CAPTURE(firsts.second);
      auto cudnn = make_backend("cudnn");
      auto naive = make_backend("naive");
      const BlockResult a = run_block(*cudnn, seed, firsts.first, firsts.second);
      const BlockResult b = run_block(*naive, seed, firsts.first, firsts.second);
      CHECK(rel_err(a.out, b.out) < 1e-2);
      CHECK(rel_err(a.grads, b.grads) < 2e-2);
      MESSAGE("cudnn vs naive: out " << rel_err(a.out, b.out) << ", grads "
                                     << rel_err(a.grads, b.grads));
      auto* be = dynamic_cast<attn::gpu::CudaBackend*>(cudnn.get());
      REQUIRE(be != nullptr);
      CHECK(be->cudnn_fallback_blocks() == 0);  // cuDNN did the work, not the flash kernels
    }
  }
}
