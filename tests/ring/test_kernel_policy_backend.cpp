// A tuned kernel policy read back by the host backend (issue #13): `kernel: auto` with a policy
// runs each block on the path the policy gives for its rows, and block_calls() says so. The
// outputs are compared bit for bit with a backend fixed on that path (the host runs on Kokkos'
// Serial space, so a path's result is deterministic), and the two host paths round differently
// on the test block: the pick changed the kernel, not only the counter. Then the
// ring_attention sweep's `kernel_policy` key.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "backend.hpp"
#include "config/node.hpp"
#include "config/policy_file.hpp"
#include "config/policy_text.hpp"
#include "host/host_backend.hpp"
#include "host_sweep.hpp"
#include "kernel_paths.hpp"
#include "kernel_policy.hpp"
#include "sweeps/ring_attention.hpp"
#include "sweeps/sweep.hpp"

namespace {

using rb::attn::AttentionBackend;
using rb::attn::KernelChoice;

// Tuned at batch 1, 2 heads; fp32, head_dim 16, exact attention: rows 32..64 kokkos,
// 256..512 materialized.
const std::string kHostPolicy =
    "version: 2\n"
    "kind: ringbench-kernel-policy\n"
    "grid: {batch: 1, num_heads: 2}\n"
    "machine: {device: host, gpu: null, cudnn: null}\n"
    "rules:\n" +
    std::string(rb::test::kHostPolicyRule) +
    "  - {block_rows_min: 32, block_rows_max: 64, path: kokkos}\n"
    "  - {block_rows_min: 256, block_rows_max: 512, path: materialized}\n";

constexpr int kHeads = 2, kHeadDim = 16;

std::shared_ptr<const rb::attn::KernelPolicy> host_policy() {
  return rb::parse_kernel_policy_text(kHostPolicy, "host_policy.yaml")->policy;
}

// Deterministic inputs in [-1, 1).
std::vector<float> values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

struct Outputs {
  std::vector<float> out, lse, dq, dk, dv;
  rb::attn::BlockCalls calls;
};

float* floats(AttentionBackend& be, std::size_t n) {
  return static_cast<float*>(be.allocate(n * sizeof(float)));
}

// One forward and one backward block of `rows` query and key rows (a ring step's block at
// block rows = `rows`) on a backend made for `choice`.
Outputs run_block(const KernelChoice& choice, std::int64_t rows) {
  auto be = rb::attn::make_host_backend(choice);
  const std::size_t n = static_cast<std::size_t>(kHeads * rows * kHeadDim);
  const std::size_t r = static_cast<std::size_t>(kHeads * rows);
  float *q = floats(*be, n), *k = floats(*be, n), *v = floats(*be, n), *g = floats(*be, n);
  float *out = floats(*be, n), *lse = floats(*be, r), *delta = floats(*be, r);
  float *dq = floats(*be, n), *dk = floats(*be, n), *dv = floats(*be, n);
  std::uint32_t seed = 1;
  for (float* t : {q, k, v, g}) be->copy_to_device(t, values(n, seed++).data(), n * sizeof(float));
  be->init_forward(out, lse, static_cast<std::int64_t>(r), kHeadDim);
  for (float* t : {dq, dk, dv}) be->fill_zero(t, n * sizeof(float));
  const rb::attn::Dims dims{1, kHeads, kHeadDim, rows, rows};
  const rb::attn::Span all{0, rows, 0, 1};
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const rb::attn::BlockInputs in{dims, rb::attn::DType::F32, scale, all, all, {}, q, k, v};
  rb::attn::ForwardBlock f{in, out, lse};
  be->forward(f);
  be->backward_prepare(g, out, delta, static_cast<std::int64_t>(r), kHeadDim, rb::attn::DType::F32);
  rb::attn::BackwardBlock b{in, g, lse, delta, dq, dk, dv};
  be->backward(b);
  Outputs o{std::vector<float>(n), std::vector<float>(r), std::vector<float>(n),
            std::vector<float>(n), std::vector<float>(n), be->block_calls()};
  be->copy_to_host(o.out.data(), out, n * sizeof(float));
  be->copy_to_host(o.lse.data(), lse, r * sizeof(float));
  be->copy_to_host(o.dq.data(), dq, n * sizeof(float));
  be->copy_to_host(o.dk.data(), dk, n * sizeof(float));
  be->copy_to_host(o.dv.data(), dv, n * sizeof(float));
  for (float* t : {q, k, v, g, out, lse, delta, dq, dk, dv}) be->release(t);
  return o;
}

double max_diff(const Outputs& a, const Outputs& b) {
  double d = 0;
  auto over = [&](const std::vector<float>& x, const std::vector<float>& y) {
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, double(std::abs(x[i] - y[i])));
  };
  over(a.out, b.out);
  over(a.lse, b.lse);
  over(a.dq, b.dq);
  over(a.dk, b.dk);
  over(a.dv, b.dv);
  return d;
}

// The auto result is the fixed path's bit for bit, and within fp32 rounding of the other's.
void check_ran_on(const Outputs& got, const Outputs& path, const Outputs& other) {
  CHECK(max_diff(got, path) == 0.0);
  CHECK(max_diff(got, other) < 1e-4);
  CHECK(max_diff(path, other) > 0.0);  // else equality above could not tell the paths apart
}

rb::ParseContext host_world() {
  return rbtest::host_context(2);
}

// A ring_attention sweep's map as the driver hands it over, from config file `config`.
rb::SweepSpec ring_spec(const std::string& yaml, const std::string& config) {
  return rbtest::sweep_spec("ring_attention", "ra", yaml, config);
}

}  // namespace

TEST_CASE("host backend, auto + policy: a block in the materialized range runs materialized") {
  const auto policy = host_policy();
  const std::int64_t rows = 256;
  const Outputs got = run_block({"auto", "default", policy}, rows);
  const Outputs mat = run_block({"materialized", "default"}, rows);
  const Outputs kokkos = run_block({"kokkos", "default"}, rows);
  CHECK(got.calls.of("materialized") == 2);  // one forward, one backward
  CHECK(got.calls.of("kokkos") == 0);
  CHECK(got.calls.from_policy == 2);
  check_ran_on(got, mat, kokkos);
  // Without the policy, auto's built-in rule runs this block on kokkos.
  const Outputs builtin = run_block({"auto", "default"}, rows);
  CHECK(builtin.calls.of("kokkos") == 2);
  CHECK(builtin.calls.from_policy == 0);
  check_ran_on(builtin, kokkos, mat);
}

TEST_CASE(
    "host backend, auto + policy: blocks out of the policy's reach follow the built-in rule") {
  const auto policy = host_policy();
  // A quarter of the first range's rows, four times the last's: rows and keys four log2 steps
  // away, beyond kPolicyReach.
  for (const std::int64_t rows : {8, 2048}) {
    CAPTURE(rows);
    const Outputs got = run_block({"auto", "default", policy}, rows);
    CHECK(got.calls.of("kokkos") == 2);
    CHECK(got.calls.of("materialized") == 0);
    CHECK(got.calls.from_policy == 0);
    check_ran_on(got, run_block({"kokkos", "default"}, rows),
                 run_block({"materialized", "default"}, rows));
  }
}

TEST_CASE("host backend, auto + policy: a block just beyond the last range follows it") {
  // 1024 rows: twice 512 (two log2 steps, rows and keys), within reach of the materialized range.
  const Outputs got = run_block({"auto", "default", host_policy()}, 1024);
  CHECK(got.calls.of("materialized") == 2);
  CHECK(got.calls.from_policy == 2);
}

TEST_CASE("host backend, auto + policy: the policy's kokkos range counts as the policy's") {
  // kokkos is also the built-in choice: only from_policy tells who chose it.
  const Outputs got = run_block({"auto", "default", host_policy()}, 48);
  CHECK(got.calls.of("kokkos") == 2);
  CHECK(got.calls.from_policy == 2);
}

TEST_CASE("host backend: a named path ignores a policy handed with it") {
  const Outputs got = run_block({"kokkos", "default", host_policy()}, 256);
  CHECK(got.calls.of("kokkos") == 2);
  CHECK(got.calls.of("materialized") == 0);
  CHECK(got.calls.from_policy == 0);
}

TEST_CASE("ring_attention: kernel_policy with a named kernel is a config error") {
  const rbtest::ConfigFolder folder("policy-sweep", "host.yaml", kHostPolicy);
  const rb::cfg::ConfigError e = rbtest::ring_config_error(
      "{seq_lengths: [64], num_heads: 2, head_dim: 16, kernel: materialized,\n"
      " kernel_policy: host.yaml}",
      folder.config, 2);
  CHECK(e.where().file == folder.config);
  CHECK(e.key() == "sweeps[0].kernel_policy");
  CHECK(e.where().line == 2);
  CHECK(e.message().find("steers kernel: auto, but this sweep names kernel 'materialized'") !=
        std::string::npos);
}

TEST_CASE("ring_attention: kernel_policy of the sweep, else the top level's, steers only auto") {
  const rbtest::ConfigFolder folder("policy-sweep", "host.yaml", kHostPolicy);
  const std::string& config = folder.config;
  const auto own = rb::parse_ring_attention(
      ring_spec("{seq_lengths: [64], num_heads: 2, head_dim: 16, kernel_policy: host.yaml}",
                config),
      host_world());
  REQUIRE(own->kernel_policies().size() == 1);
  CHECK(own->kernel_policies()[0]->file == (folder.dir / "host.yaml").string());
  CHECK(own->kernel_policies()[0]->key == "sweeps[0].kernel_policy");

  rb::ParseContext top = host_world();
  top.kernel_policy = rb::parse_kernel_policy_text(kHostPolicy, "top.yaml");
  const auto inherited = rb::parse_ring_attention(
      ring_spec("{seq_lengths: [64], num_heads: 2, head_dim: 16}", config), top);
  REQUIRE(inherited->kernel_policies().size() == 1);
  CHECK(inherited->kernel_policies()[0] == top.kernel_policy);
  // A sweep naming its kernel does not follow the top-level policy (and is no error).
  const auto named = rb::parse_ring_attention(
      ring_spec("{seq_lengths: [64], num_heads: 2, head_dim: 16, kernel: kokkos}", config), top);
  CHECK(named->kernel_policies().empty());
}
