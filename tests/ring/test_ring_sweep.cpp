// The ring_attention sweep's config parser (pretending a world of 4): points, defaults, and
// rejected configurations whose messages carry the numbers and the key. Then the sweep run on
// the host path into a real file, read back in the points-table layout (schema v2).
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <string>

#include "app/paths.hpp"
#include "app/progress.hpp"
#include "config/node.hpp"
#include "metrics/h5.hpp"
#include "runtime/mpi.hpp"
#include "sweeps/ring_attention.hpp"
#include "host_sweep.hpp"
#include "test_support.hpp"

namespace {

rb::SweepSpec spec_of(const std::string& yaml) {
  return rbtest::sweep_spec("ring_attention", "ra", yaml);
}

rb::ParseContext world4() {
  return rbtest::host_context(4);
}

// A ring_attention sweep 'ra' of these keys run into a fresh file.
rbtest::HostSweepRun run_ra(const std::string& keys, const std::string& stem) {
  return rbtest::run_host_sweep("sweeps:\n  - {type: ring_attention, name: ra, " + keys + "}\n",
                                rb::parse_ring_attention, stem);
}

std::string rejection(const std::string& yaml, const std::string& key) {
  return rbtest::rejection(rb::parse_ring_attention, spec_of(yaml), world4(), key);
}

// Two points of 2 heads, two iterations each: a ring of one rank and a ring of the whole world,
// with `more_keys` (each after a comma) added to the sweep's map.
rbtest::HostSweepRun run_two_rings(const std::string& more_keys, const std::string& stem) {
  return run_ra("seq_lengths: [32], ring_sizes: [1, " + std::to_string(rb::test::world()) +
                    "], num_heads: 2, head_dim: 8, warmup: 0, iterations: 2" + more_keys,
                stem);
}

// A causal run of 4 heads, one iteration, on one ring of the whole world, of these `scheme:`
// keys (the schemes that split heads split them over the world): checks that the sweep and
// each of its points ran ok.
rbtest::HostSweepRun run_schemes(const std::string& scheme_keys, const std::string& stem) {
  const rbtest::HostSweepRun run =
      run_ra("seq_lengths: [32], ring_sizes: [" + std::to_string(rb::test::world()) +
                 "], num_heads: 4, head_dim: 8, causal: true, warmup: 0, iterations: 1, scheme: " +
                 scheme_keys,
             stem);
  CHECK(run.outcome.ok);
  for (const auto& s : rb::h5::read_strings(run.path, "/sweeps/ra/status")) CHECK(s == "ok");
  return run;
}

}  // namespace

TEST_CASE("ring_attention config: points are seq_lengths x ring_sizes x layouts x dtypes") {
  auto s = rb::parse_ring_attention(
      spec_of("{type: ring_attention, seq_lengths: [64, 128], ring_sizes: [2, 4], "
              "layout: [zigzag, striped], dtype: [fp32, bf16], causal: true, num_heads: 2, "
              "head_dim: 8}"),
      world4());
  const auto plan = s->plan();
  REQUIRE(plan.size() == 16);
  CHECK(plan[0].find("S=64 R=2 (2 rings) causal zigzag fp32") == 0);
  CHECK(plan[15].find("S=128 R=4 (1 ring) causal striped bf16") == 0);
  CHECK(s->estimated_output_bytes() > 0);
  // defaults: ring size = world, layout zigzag when causal, contiguous otherwise
  auto d = rb::parse_ring_attention(spec_of("{seq_lengths: 64}"), world4());
  REQUIRE(d->plan().size() == 1);
  CHECK(d->plan()[0].find("S=64 R=4 (1 ring) contiguous fp32 b=1 h=8 d=64 fwd+bwd") == 0);
  // embed_dim gives head_dim
  auto e =
      rb::parse_ring_attention(spec_of("{seq_lengths: 64, embed_dim: 96, num_heads: 3}"), world4());
  CHECK(e->plan()[0].find("h=3 d=32") != std::string::npos);
}

TEST_CASE("ring_attention config: a dtype's long name is its short one (one dtype vocabulary)") {
  auto s = rb::parse_ring_attention(
      spec_of("{seq_lengths: [64], dtype: [float32, bfloat16, fp16], num_heads: 2, head_dim: 8}"),
      world4());
  const auto plan = s->plan();
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].find(" fp32 ") != std::string::npos);
  CHECK(plan[1].find(" bf16 ") != std::string::npos);
  CHECK(plan[2].find(" fp16 ") != std::string::npos);
  CHECK(rejection("{seq_lengths: [64], dtype: float64}", "dtype")
            .find("expected one of fp32|fp16|bf16 (or float32|float16|bfloat16), got 'float64'") !=
        std::string::npos);
}

TEST_CASE("ring_attention config: ring_sizes: powers_of_two follows the world size") {
  auto sizes_for = [](int world) {
    rb::ParseContext c = world4();
    c.world_size = world;
    auto s = rb::parse_ring_attention(spec_of("{seq_lengths: [96], ring_sizes: powers_of_two}"), c);
    std::string rs;
    for (const auto& line : s->plan())
      rs += line.substr(line.find(" R=") + 3,
                        line.find(' ', line.find(" R=") + 1) - line.find(" R=") - 3) +
            ",";
    return rs;
  };
  CHECK(sizes_for(1) == "1,");
  CHECK(sizes_for(4) == "1,2,4,");
  CHECK(sizes_for(6) == "1,2,6,");  // the powers of two dividing 6, then the whole world
  CHECK(rejection("{seq_lengths: [64], ring_sizes: power_of_two}", "ring_sizes") != "");
}

TEST_CASE("ring_attention config: ring_order is node_aware (default) or rank") {
  CHECK(rejection("{seq_lengths: [64]}", "").empty());
  CHECK(rejection("{seq_lengths: [64], ring_order: rank}", "").empty());
  CHECK(rejection("{seq_lengths: [64], ring_order: node_aware}", "").empty());
  const std::string bad = rejection("{seq_lengths: [64], ring_order: nodes}", "ring_order");
  CHECK(bad.find("nodes") != std::string::npos);
  CHECK(bad.find("node_aware") != std::string::npos);
  CHECK(bad.find("rank") != std::string::npos);
}

TEST_CASE("ring_attention config: kernel and kernel_tile come from the kernel path table") {
  rb::ParseContext cuda = world4();
  cuda.backend = rb::Backend::Cuda;
  auto refused = [&](const std::string& yaml, const std::string& key) {
    try {
      rb::parse_ring_attention(spec_of(yaml), cuda);
    } catch (const rb::cfg::ConfigError& e) {
      CHECK(e.key() == "sweeps[0]." + key);
      return e.message();
    }
    return std::string();
  };
  const std::string cudnn = refused("{seq_lengths: [64], kernel: cudnn}", "kernel");
#ifdef RINGBENCH_HAVE_CUDNN
  CHECK(cudnn.empty());
#else
  CHECK(cudnn.find("kernel 'cudnn' is not in this build") == 0);
#endif
  CHECK(refused("{seq_lengths: [64], kernel: kokkos}", "kernel")
            .find("kernel 'kokkos' is not a cuda kernel path") == 0);
#ifdef RINGBENCH_HAVE_CUDA
  CHECK(refused("{seq_lengths: [64], kernel: auto, kernel_tile: big}", "kernel_tile") != "");
  CHECK(refused("{seq_lengths: [64], kernel: flash, kernel_tile: big}", "kernel_tile") != "");
#endif
  // The host has one path: kokkos, by name or as auto; its tile variants are the table's.
  CHECK(rejection("{seq_lengths: [64], kernel: kokkos}", "").empty());
  CHECK(rejection("{seq_lengths: [64], kernel: kokkos, kernel_tile: default}", "").empty());
  CHECK(rejection("{seq_lengths: [64], kernel: kokkos, kernel_tile: big}", "kernel_tile")
            .find("'big'") != std::string::npos);
  CHECK(rejection("{seq_lengths: [64], kernel_tile: big}", "kernel_tile").find("'big'") !=
        std::string::npos);
  CHECK(rejection("{seq_lengths: [64], kernel: flash}", "kernel")
            .find("kernel 'flash' is not a host kernel path") == 0);
  const std::string big = rejection("{seq_lengths: [64], head_dim: 512}", "head_dim");
  CHECK(big.find("head_dim 512") != std::string::npos);
  CHECK(big.find("256") != std::string::npos);
  CHECK(rejection("{seq_lengths: [64], num_heads: 1, embed_dim: 512}", "embed_dim")
            .find("head_dim 512") != std::string::npos);
}

TEST_CASE("ring_attention config: impossible combinations are rejected with the numbers") {
  struct Row {
    const char* yaml;
    const char* key;
    const char* message;
  };
  const Row rows[] = {
      {"{seq_lengths: [64], ring_sizes: [3]}", "ring_sizes",
       "ring size 3 does not divide the world size 4 (4 % 3 = 1): the world splits into world / "
       "ring size concurrent rings"},
      {"{seq_lengths: [100], causal: true}", "seq_lengths",
       "point S=100, ring size 4, layout zigzag: zigzag layout needs the sequence length divisible "
       "by 2 x ring size: 100 % 8 = 4"},
      {"{seq_lengths: [66], ring_sizes: [4]}", "seq_lengths",
       "point S=66, ring size 4, layout contiguous: sequence length must be divisible by the ring "
       "size: 66 % 4 = 2"},
      {"{seq_lengths: [64], segment_lengths: [16, 32], dilation_rates: [1]}", "dilation_rates",
       "segment_lengths has 2 entries and dilation_rates 1: one dilation rate per segment length"},
      {"{seq_lengths: [64], segment_lengths: [16], dilation_rates: [32]}", "dilation_rates",
       "dilation rate 32 (entry 0) is larger than its segment length 16"},
      {"{seq_lengths: [64], segment_lengths: [16, 12], dilation_rates: [1, 8]}", "segment_lengths",
       "segment length 12 (entry 1) is not divisible by its dilation rate 8: 12 % 8 = 4"},
      {"{seq_lengths: [64, 96], segment_lengths: [64], dilation_rates: [2]}", "seq_lengths",
       "point S=96, ring size 4, layout contiguous: branch 0: sequence length must be divisible by "
       "the segment length: 96 % 64 = 32"},
      {"{seq_lengths: [64], segment_lengths: [128], dilation_rates: [2]}", "seq_lengths",
       "point S=64, ring size 4, layout contiguous: branch 0: segment length 128 is longer than "
       "the sequence length 64"},
      {"{seq_lengths: [64], embed_dim: 100, num_heads: 8}", "embed_dim",
       "embed_dim 100 is not divisible by num_heads 8 (100 % 8 = 4)"},
      {"{seq_lengths: [64], embed_dim: 128, num_heads: 4, head_dim: 16}", "head_dim",
       "head_dim 16 contradicts embed_dim / num_heads = 128 / 4 = 32"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.yaml);
    CHECK(rejection(r.yaml, r.key) == r.message);
  }
  CHECK(rejection("{seq_lengths: [64]}", "").empty());
  CHECK(rejection("{seq_lengths: [64], ring_sizes: [8]}", "ring_sizes")
            .find("ring size 8 does not divide the world size 4") == 0);
  CHECK(rejection("{num_heads: 2}", "seq_lengths").find("required") == 0);
  CHECK_FALSE(rejection("{seq_lengths: [64], layout: zigzg}", "layout").empty());
  CHECK_FALSE(rejection("{seq_lengths: [64], validate: {dumb: true}}", "validate.dumb").empty());
}

TEST_CASE("ring_attention sweep: one points table, [world, P, ...] metrics, steps per ring size") {
  const int world = rb::test::world();
  const rbtest::HostSweepRun run = run_two_rings("", "sweep");
  const std::string& path = run.path;
  const rb::SweepOutcome& outcome = run.outcome;
  CHECK(outcome.ok);
  const std::uint64_t W = static_cast<std::uint64_t>(world), P = 2;
  std::vector<std::uint64_t> dims;
  const auto ring_size = rb::h5::read_ints(path, "/sweeps/ra/points/ring_size", &dims);
  REQUIRE(dims == std::vector<std::uint64_t>{P});
  CHECK(ring_size == std::vector<std::int64_t>{1, world});
  CHECK(rb::h5::read_strings(path, "/sweeps/ra/points/kernel") ==
        std::vector<std::string>{"auto", "auto"});
  CHECK(rb::h5::read_strings(path, "/sweeps/ra/points/kernel_tile") ==
        std::vector<std::string>{"default", "default"});
  for (const auto& s : rb::h5::read_strings(path, "/sweeps/ra/status")) CHECK(s == "ok");
  for (const auto& s : rb::h5::read_strings(path, "/sweeps/ra/kernel_path")) CHECK(s == "kokkos");
  const auto fwd = rb::h5::read_doubles(path, "/sweeps/ra/forward_time_s", &dims);
  CHECK(dims == std::vector<std::uint64_t>{W, P, 2});
  for (double t : fwd) CHECK(t > 0);
  // Steps: one table per ring size, [world, its points, R] (no padding to the largest ring);
  // the main table has each rank's sums over the steps.
  const auto wait_sum = rb::h5::read_doubles(path, "/sweeps/ra/forward_wait_s", &dims);
  CHECK(dims == std::vector<std::uint64_t>{W, P});
  for (const std::int64_t R : {std::int64_t{1}, std::int64_t{world}}) {
    const std::string g = "/sweeps/ra/steps/R" + std::to_string(R);
    const std::uint64_t Q = world == 1 ? 2 : 1, n = static_cast<std::uint64_t>(R);
    const auto wait = rb::h5::read_doubles(path, g + "/step_wait_s", &dims);
    CHECK(dims == std::vector<std::uint64_t>{W, Q, n});
    CHECK(rb::h5::read_ints(path, g + "/points/sweep_point").size() == Q);
    const auto pairs = rb::h5::read_ints(path, g + "/step_pairs");
    for (auto x : pairs) CHECK(x > 0);
    const std::uint64_t pi = R == 1 ? 0 : 1;  // the sweep point of the table's last row
    for (std::uint64_t r = 0; r < W; ++r) {
      double sum = 0;
      for (std::uint64_t s = 0; s < n; ++s) sum += wait[(r * Q + Q - 1) * n + s];
      CHECK(wait_sum[r * P + pi] == doctest::Approx(sum));
    }
  }
  const auto rel = rb::h5::read_doubles(path, "/sweeps/ra/dv_max_rel", &dims);
  CHECK(dims == std::vector<std::uint64_t>{W, P});
  for (double e : rel) CHECK(e < 2e-4);
  // One node: the ring of the world is in world order (ring_id 0, ring_rank the rank); rings of
  // one are the ranks themselves. Communicators are created once per ring size, here sizes 1
  // and world (one size when the world is 1).
  const auto ring_id = rb::h5::read_ints(path, "/sweeps/ra/ring_id");
  const auto ring_rank = rb::h5::read_ints(path, "/sweeps/ra/ring_rank");
  const auto created = rb::h5::read_ints(path, "/sweeps/ra/comm_created", &dims);
  CHECK(dims == std::vector<std::uint64_t>{W, P});
  const auto hops = rb::h5::read_ints(path, "/sweeps/ra/ring_crossing_hops");
  for (std::uint64_t r = 0; r < W; ++r) {
    CHECK(ring_id[r * P + 0] == static_cast<std::int64_t>(r));
    CHECK(ring_id[r * P + 1] == 0);
    CHECK(ring_rank[r * P + 1] == static_cast<std::int64_t>(r));
    CHECK(created[r * P + 0] == 1);
    CHECK(created[r * P + 1] == (world > 1 ? 1 : 0));
    CHECK(hops[r * P + 0] == 0);
    CHECK(hops[r * P + 1] == 0);
  }
  CHECK(rb::h5::read_int_attr(path, "/sweeps/ra", "ring_comm_creations") ==
        std::vector<std::int64_t>{world > 1 ? 2 : 1});
  CHECK(rb::h5::read_string_attr(path, "/sweeps/ra", "ring_order") == "node_aware");
  const auto oom = rb::h5::read_ints(path, "/sweeps/ra/oom_requested_bytes");
  for (auto b : oom) CHECK(b == -1);
  CHECK(rb::h5::read_string_attr(path, "/sweeps/ra/forward_tflops", "units") == "TFLOP/s");
  CHECK(rb::h5::read_string_attr(path, "/sweeps/ra/points/seq_len", "role") == "key");
}

TEST_CASE(
    "ring_attention sweep: validate.reference full | sampled | off is recorded, off never "
    "silently") {
  const int world = rb::test::world();
  const std::string R = std::to_string(world);
  CHECK(rejection("{seq_lengths: [64], validate: {reference: partial}}", "validate.reference")
            .find("partial") != std::string::npos);
  CHECK_FALSE(
      rejection("{seq_lengths: [64], validate: {sample_rows: many}}", "validate.sample_rows")
          .empty());
  CHECK_FALSE(
      rejection("{seq_lengths: [64], validate: {sample_rows: 1}}", "validate.sample_rows").empty());
  CHECK(rejection("{seq_lengths: [64], validate: {sample_rows: auto}}", "").empty());
  // Issue #31 item 16: an explicit 0 meant "the dtype's default"; it is refused, absent keeps it.
  const std::string zero =
      rejection("{seq_lengths: [64], validate: {tolerance: 0}}", "validate.tolerance");
  CHECK(zero.find("tolerance must be > 0") != std::string::npos);
  CHECK(zero.find("leave it out for the dtype's default") != std::string::npos);
  CHECK(rejection("{seq_lengths: [64], validate: {tolerance: 0.0}}", "validate.tolerance")
            .find("> 0") != std::string::npos);
  CHECK(rejection("{seq_lengths: [64], validate: {tolerance: 1e-3}}", "").empty());
  CHECK(rejection("{seq_lengths: [64], validate: {dump: false}}", "").empty());
  for (const std::string mode : {"full", "sampled", "off"}) {
    CAPTURE(mode);
    const rbtest::HostSweepRun run = run_ra(
        "seq_lengths: [64], ring_sizes: [" + R +
            "], num_heads: 2, head_dim: 8, warmup: 0, iterations: 1, validate: {reference: " +
            mode + ", sample_rows: 4}",
        "parity_" + mode);
    CHECK(run.outcome.ok);
    for (const auto& s : rb::h5::read_strings(run.path, "/sweeps/ra/parity_mode")) CHECK(s == mode);
    for (const auto& s : rb::h5::read_strings(run.path, "/sweeps/ra/status")) CHECK(s == "ok");
    const auto rel = rb::h5::read_doubles(run.path, "/sweeps/ra/out_max_rel");
    const auto bytes = rb::h5::read_ints(run.path, "/sweeps/ra/parity_reference_bytes");
    const auto elements = rb::h5::read_ints(run.path, "/sweeps/ra/parity_elements");
    const std::int64_t shard = 2 * (64 / world) * 8;  // heads x local rows x d
    for (std::size_t r = 0; r < rel.size(); ++r) {
      if (mode == "off") {
        CHECK(std::isnan(rel[r]));
        CHECK(bytes[r] == -1);
        CHECK(rb::h5::read_strings(run.path, "/sweeps/ra/parity_note")[r].find("not checked") == 0);
      } else {
        CHECK(rel[r] < 2e-4);
        CHECK(bytes[r] > 0);
        // [world, P, 4] as O, dQ, dK, dV: sampled compares dQ on 4 rows of two heads.
        CHECK(elements[r * 4 + 1] == (mode == "full" ? shard : 2 * 4 * 8));
      }
    }
  }
}

TEST_CASE("ring_attention config: scheme is ring (default), allgather or ulysses, one point each") {
  const auto sweep =
      rb::parse_ring_attention(spec_of("{seq_lengths: [64], ring_sizes: [2, 4], num_heads: 8, "
                                       "scheme: [ring, allgather, ulysses]}"),
                               world4());
  const auto plan = sweep->plan();
  REQUIRE(plan.size() == 6);                 // 2 ring sizes x 3 schemes, scheme innermost
  CHECK(plan[0].rfind("S=64 R=2", 0) == 0);  // the ring's label carries no scheme
  CHECK(plan[1].rfind("allgather S=64 R=2", 0) == 0);
  CHECK(plan[2].rfind("ulysses S=64 R=2", 0) == 0);
  CHECK(rejection("{seq_lengths: [64], scheme: ulyses}", "scheme").find("ulysses") !=
        std::string::npos);
  CHECK(rejection("{seq_lengths: [64], num_heads: 6, scheme: ulysses}", "scheme")
            .find("ulysses at ring size 4: num_heads 6 is not divisible by the group size 4") == 0);
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, segment_lengths: [64], dilation_rates: [4], "
                  "scheme: ulysses}",
                  "scheme")
            .find("dilation rate 4 does not divide the 2 heads per rank") != std::string::npos);
  rb::ParseContext gpu = world4();
  gpu.backend = rb::Backend::Cuda;
  // Every scheme has its NCCL collectives (ring/nccl_group_transport.cpp): nothing refused on the
  // GPU path.
  CHECK(rbtest::rejection(rb::parse_ring_attention,
                          spec_of("{seq_lengths: [64], num_heads: 8, scheme: [allgather, ulysses, "
                                  "hybrid], ulysses_degree: 2}"),
                          gpu, "scheme")
            .empty());
  CHECK(rb::parse_ring_attention(
            spec_of("{seq_lengths: [64], num_heads: 8, scheme: [ring, allgather]}"), gpu)
            ->plan()
            .size() == 2);
}

TEST_CASE("ring_attention sweep: every scheme into the file, keyed, parity ok") {
  const int world = rb::test::world();
  if (4 % world != 0) return;  // Ulysses splits the 4 heads over the world
  const rbtest::HostSweepRun run = run_schemes("[ring, allgather, ulysses]", "schemes");
  CHECK(rb::h5::read_strings(run.path, "/sweeps/ra/points/scheme") ==
        std::vector<std::string>{"ring", "allgather", "ulysses"});
  const auto bytes = rb::h5::read_ints(run.path, "/sweeps/ra/bytes_sent_bytes");
  if (world > 1)
    for (auto b : bytes) CHECK(b > 0);
}

TEST_CASE("ring_attention config: num_kv_heads (GQA/MQA) divides num_heads, on both paths") {
  const auto sweep = rb::parse_ring_attention(
      spec_of("{seq_lengths: [64], num_heads: 8, num_kv_heads: 2}"), world4());
  CHECK(sweep->plan()[0].find(" h=8 kvh=2 ") != std::string::npos);
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, num_kv_heads: 3}", "num_kv_heads")
            .find("num_kv_heads 3 must divide num_heads 8") == 0);
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, num_kv_heads: 16}", "num_kv_heads") != "");
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, num_kv_heads: 2, scheme: ulysses}", "scheme")
            .find("num_kv_heads 2 is not divisible by the group size 4") != std::string::npos);
  rb::ParseContext gpu = world4();
  gpu.backend = rb::Backend::Cuda;
  CHECK(rbtest::rejection(rb::parse_ring_attention,
                          spec_of("{seq_lengths: [64], num_heads: 8, num_kv_heads: 4}"), gpu,
                          "num_kv_heads")
            .empty());
  CHECK(rbtest::rejection(rb::parse_ring_attention,
                          spec_of("{seq_lengths: [64], num_heads: 8, num_kv_heads: 3}"), gpu,
                          "num_kv_heads")
            .find("num_kv_heads 3 must divide num_heads 8") == 0);
  CHECK(rbtest::rejection(rb::parse_ring_attention,
                          spec_of("{seq_lengths: [64], num_heads: 8, num_kv_heads: 8}"), gpu,
                          "num_kv_heads")
            .empty());
}

TEST_CASE("ring_attention config: scheme hybrid needs ulysses_degree dividing each ring size") {
  const auto sweep =
      rb::parse_ring_attention(spec_of("{seq_lengths: [64], ring_sizes: [2, 4], num_heads: 8, "
                                       "scheme: hybrid, ulysses_degree: 2}"),
                               world4());
  CHECK(sweep->plan()[0].rfind("hybrid(U=2) S=64 R=2", 0) == 0);
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, scheme: hybrid}", "scheme")
            .find("needs ulysses_degree") != std::string::npos);
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, ulysses_degree: 2}", "ulysses_degree")
            .find("hybrid's") != std::string::npos);
  CHECK(rejection("{seq_lengths: [64], ring_sizes: [1, 4], num_heads: 8, scheme: hybrid, "
                  "ulysses_degree: 2}",
                  "ulysses_degree")
            .find("hybrid at ring size 1, layout contiguous: ulysses_degree 2 does not divide the "
                  "ring size 1") == 0);
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, causal: true, layout: striped, scheme: "
                  "hybrid, ulysses_degree: 2}",
                  "ulysses_degree")
            .find("the striped layout of 4 ranks does not split") != std::string::npos);
}

TEST_CASE(
    "ring_attention config: ulysses_head_groups, a Ulysses point per value, refused elsewhere") {
  const auto sweep = rb::parse_ring_attention(
      spec_of("{seq_lengths: [64], ring_sizes: [2], num_heads: 8, scheme: [ring, ulysses], "
              "ulysses_head_groups: [1, 2, 4]}"),
      world4());
  const auto plan = sweep->plan();
  REQUIRE(plan.size() == 4);  // the ring once, Ulysses per value
  CHECK(plan[0].rfind("S=64 R=2", 0) == 0);
  CHECK(plan[1].rfind("ulysses S=64 R=2", 0) == 0);
  CHECK(plan[2].rfind("ulysses(G=2) S=64 R=2", 0) == 0);
  CHECK(plan[3].rfind("ulysses(G=4) S=64 R=2", 0) == 0);
  CHECK(
      rejection("{seq_lengths: [64], num_heads: 8, ulysses_head_groups: 2}", "ulysses_head_groups")
          .find("the Ulysses scheme's") != std::string::npos);
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, scheme: ulysses, ulysses_head_groups: 4}",
                  "ulysses_head_groups")
            .find("ulysses at ring size 4: ulysses_head_groups 4 does not divide the 2 heads") ==
        0);
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, scheme: ulysses, ulysses_head_groups: 0}",
                  "ulysses_head_groups") != "");
  CHECK(rejection("{seq_lengths: [64], num_heads: 8, scheme: [ulysses, auto], "
                  "ulysses_head_groups: [1, 2]}",
                  "ulysses_head_groups")
            .find("give it one value") != std::string::npos);
}

TEST_CASE("ring_attention sweep: Ulysses in head groups into the file, keyed, parity ok") {
  const int world = rb::test::world();
  if (4 % world != 0) return;  // Ulysses splits the 4 heads over the world, then in 2 groups
  if (4 / world % 2 != 0) return;
  const rbtest::HostSweepRun run =
      run_schemes("ulysses, ulysses_head_groups: [1, 2]", "head_groups");
  CHECK(rb::h5::read_ints(run.path, "/sweeps/ra/points/ulysses_head_groups") ==
        std::vector<std::int64_t>{1, 2});
  const auto bytes = rb::h5::read_ints(run.path, "/sweeps/ra/bytes_sent_bytes");
  REQUIRE(bytes.size() % 2 == 0);
  for (std::size_t i = 0; i < bytes.size(); i += 2) CHECK(bytes[i] == bytes[i + 1]);  // [rank][P]
}

// Issue #26: which transport moved the data (and why), and the overlap calibration beside the
// timed iterations: overlap efficiency and kernel slowdown follow from the stored parts.
TEST_CASE("ring_attention sweep: transport and overlap calibration per point") {
  const int world = rb::test::world();
  const rbtest::HostSweepRun run = run_two_rings(", overlap_repeats: 2", "overlap");
  REQUIRE(run.outcome.ok);
  const std::string& path = run.path;
  const std::uint64_t W = static_cast<std::uint64_t>(world), P = 2;
  CHECK(rb::h5::read_strings(path, "/sweeps/ra/points/transport_asked") ==
        std::vector<std::string>{"auto", "auto"});
  for (const auto& s : rb::h5::read_strings(path, "/sweeps/ra/transport")) CHECK(s == "mpi");
  for (const auto& s : rb::h5::read_strings(path, "/sweeps/ra/transport_reason"))
    CHECK(s == "host path: MPI");
  std::vector<std::uint64_t> dims;
  const auto repeats = rb::h5::read_ints(path, "/sweeps/ra/overlap_repeats", &dims);
  REQUIRE(dims == std::vector<std::uint64_t>{W, P});
  const auto eff = rb::h5::read_doubles(path, "/sweeps/ra/overlap_efficiency");
  const auto slow = rb::h5::read_doubles(path, "/sweeps/ra/backward_kernel_slowdown");
  const auto alone = rb::h5::read_doubles(path, "/sweeps/ra/forward_transfer_alone_s");
  const auto hop = rb::h5::read_doubles(path, "/sweeps/ra/hop_transfer_alone_s");
  const auto wait = rb::h5::read_doubles(path, "/sweeps/ra/forward_wait_s");
  const auto compute_alone = rb::h5::read_doubles(
      path, "/sweeps/ra/steps/R" + std::to_string(world) + "/step_compute_alone_s");
  for (std::uint64_t r = 0; r < W; ++r) {
    CHECK(repeats[r * P + 0] == 0);  // a ring of one: nothing travels, nothing calibrated
    CHECK(std::isnan(eff[r * P + 0]));
    if (world == 1) continue;
    const std::uint64_t i = r * P + 1;
    CHECK(repeats[i] == 2);
    CHECK(hop[i] > 0);
    CHECK(alone[i] == doctest::Approx((world - 1) * hop[i]));
    CHECK(eff[i] == doctest::Approx(1.0 - wait[i] / alone[i]));
    CHECK(slow[i] > 0);
    for (std::uint64_t s = 0; s < W; ++s) CHECK(compute_alone[r * W + s] > 0);
  }
}

TEST_CASE("ring_attention config: transport is the GPU path's; a list makes one point each") {
  CHECK(rejection("{seq_lengths: [64], transport: nccl}", "transport")
            .find("transport nccl needs backend: cuda (the host path moves K/V with MPI)") == 0);
  CHECK(rejection("{seq_lengths: [64], transport: nvlink}", "transport") != "");
  CHECK(rejection("{seq_lengths: [64], overlap_repeats: -1}", "overlap_repeats") != "");
  rb::ParseContext gpu = world4();
  gpu.backend = rb::Backend::Cuda;
  const auto sweep =
      rb::parse_ring_attention(spec_of("{seq_lengths: [64], transport: [nccl, copy_engine]}"), gpu);
  const auto plan = sweep->plan();
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].find(" via nccl") != std::string::npos);
  CHECK(plan[1].find(" via copy_engine") != std::string::npos);
  CHECK(rb::parse_ring_attention(spec_of("{seq_lengths: [64]}"), gpu)->plan()[0].find(" via ") ==
        std::string::npos);
}
