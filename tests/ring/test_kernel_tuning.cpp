// The kernel_tuning sweep: its config parser (grid, rejected dilations with file and key), then
// the sweep run on the host path into a real file, read back in the points-table layout.
#include <doctest/doctest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "app/paths.hpp"
#include "app/progress.hpp"
#include "config/node.hpp"
#include "kernel_paths.hpp"
#include "metrics/h5.hpp"
#include "runtime/mpi.hpp"
#include "sweeps/kernel_tuning.hpp"
#include "host_sweep.hpp"
#include "test_support.hpp"

namespace {

rb::SweepSpec spec_of(const std::string& yaml) {
  return rbtest::sweep_spec("kernel_tuning", "kt", yaml);
}

std::string rejection(const std::string& yaml, const std::string& key) {
  return rbtest::rejection(rb::parse_kernel_tuning, spec_of(yaml), rb::ParseContext{}, key);
}

}  // namespace

TEST_CASE("kernel_tuning config: one point per shape and built host path") {
  auto s = rb::parse_kernel_tuning(spec_of("{block_rows: [64, 128], head_dims: [16], causal: "
                                           "[false, true], dilations: [none, [32, 2]]}"),
                                   rb::ParseContext{});
  const auto plan = s->plan();
  REQUIRE(plan.size() == 2 * 2 * 2 * 2);  // rows x causal x dilation x {kokkos, materialized}
  CHECK(plan[0].find("rows=64 d=16 fp32 kokkos") == 0);
  CHECK(plan[1].find("rows=64 d=16 fp32 materialized") == 0);
  CHECK(plan[3].find("rows=64 d=16 fp32 w=32 r=2 materialized") == 0);
  CHECK(rejection("{head_dims: [16]}", "block_rows").find("required") == 0);
  CHECK(rejection("{block_rows: [64], dilations: [[32, 3]]}", "dilations").find("entry 0") == 0);
  CHECK(rejection("{block_rows: [64], dilations: [[128, 2]]}", "dilations").find("no block size") ==
        0);
  CHECK(rejection("{block_rows: [64], paths: [flash]}", "paths[0]").find("flash") !=
        std::string::npos);
  CHECK(rejection("{block_rows: [64], tolerance: 0}", "tolerance").find("tolerance must be > 0") ==
        0);
  CHECK(rejection("{block_rows: [64], tolerance: 0.001}", "tolerance").empty());
}

TEST_CASE(
    "kernel_tuning config: dilations a block size cannot hold are skipped; paths narrow the grid") {
  auto s = rb::parse_kernel_tuning(
      spec_of("{block_rows: [64, 128, 192], head_dims: [16], dilations: [none, [128, 2]], "
              "paths: [materialized]}"),
      rb::ParseContext{});
  const auto plan = s->plan();
  // 64: none only; 128: none and (128, 2); 192: none only (128 does not divide 192).
  REQUIRE(plan.size() == 4);
  CHECK(plan[0].find("rows=64 d=16 fp32 materialized") == 0);
  CHECK(plan[2].find("rows=128 d=16 fp32 w=128 r=2 materialized") == 0);
  CHECK(plan[3].find("rows=192 d=16 fp32 materialized") == 0);
  CHECK(rejection("{block_rows: [64], dilations: [sparse]}", "dilations") != "");
  CHECK(rejection("{block_rows: [64], causal: maybe}", "causal") != "");
  CHECK(rejection("{block_rows: [64], head_dim: 16}", "head_dim") != "");
}

TEST_CASE("kernel_tuning sweep: every host path timed and parity-checked per shape") {
  const int world = rb::test::world();
  const std::string yaml =
      "sweeps:\n  - {type: kernel_tuning, name: kt, block_rows: [64, 128], head_dims: [16], "
      "num_heads: 2, causal: [false, true], dilations: [[32, 2]], warmup: 1, iterations: 3}\n";
  const auto run = rbtest::run_host_sweep(yaml, rb::parse_kernel_tuning, "kernel_tuning");
  CHECK(run.outcome.ok);
  const std::string& path = run.path;
  const std::uint64_t W = static_cast<std::uint64_t>(world), P = 8;
  // Points in grid order: block_rows, then causal, then path (kokkos, materialized).
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> int_keys = {
      {"block_rows", {64, 64, 64, 64, 128, 128, 128, 128}},
      {"causal", {0, 0, 1, 1, 0, 0, 1, 1}},
      {"head_dim", std::vector<std::int64_t>(P, 16)},
      {"segment", std::vector<std::int64_t>(P, 32)},
      {"rate", std::vector<std::int64_t>(P, 2)}};
  std::vector<std::uint64_t> dims;
  for (const auto& [key, want] : int_keys) {
    CHECK(rb::h5::read_ints(path, "/sweeps/kt/points/" + key, &dims) == want);
    CHECK(dims == std::vector<std::uint64_t>{P});
  }
  for (const auto& d : rb::h5::read_strings(path, "/sweeps/kt/points/dtype")) CHECK(d == "fp32");
  const auto paths = rb::h5::read_strings(path, "/sweeps/kt/points/path");
  for (std::size_t p = 0; p < P; ++p) CHECK(paths[p] == (p % 2 == 0 ? "kokkos" : "materialized"));
  // What tuning measures against: the built-in rule's row for each shape.
  for (const auto& a : rb::h5::read_strings(path, "/sweeps/kt/points/auto_path"))
    CHECK(a == rb::attn::auto_kernel_path(rb::attn::Device::Host, rb::attn::DType::F32, 16, false,
                                          rb::attn::KernelShape{true})
                   ->name);
  CHECK(rb::h5::read_string_attr(path, "/sweeps/kt/points/path", "role") == "key");
  for (const auto& s : rb::h5::read_strings(path, "/sweeps/kt/status")) CHECK(s == "ok");
  const auto kp = rb::h5::read_strings(path, "/sweeps/kt/kernel_path");
  CHECK(kp.size() == W * P);
  for (const auto& k : kp) CHECK_FALSE(k.empty());
  for (const char* name :
       {"/sweeps/kt/forward_time_s", "/sweeps/kt/backward_time_s",
        "/sweeps/kt/forward_kernel_time_s", "/sweeps/kt/backward_kernel_time_s"}) {
    const auto t = rb::h5::read_doubles(path, name, &dims);
    CHECK(dims == std::vector<std::uint64_t>{W, P, 3});
    for (double x : t) CHECK(x > 0);
  }
  for (auto ok : rb::h5::read_ints(path, "/sweeps/kt/parity_ok")) CHECK(ok == 1);
  for (double e : rb::h5::read_doubles(path, "/sweeps/kt/max_rel_error")) CHECK(e < 2e-4);
  CHECK(rb::h5::read_string_attr(path, "/sweeps/kt/forward_time_s", "units") == "s");
}
