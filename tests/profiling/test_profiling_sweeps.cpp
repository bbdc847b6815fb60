// Profiling sweeps end to end on the host path: parse a config, run the sweep into a real
// parallel HDF5 file, read the datasets back and check shapes, units-bearing values and that
// the data checks passed. Runs at 1-4 ranks.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/paths.hpp"
#include "app/progress.hpp"
#include "config/config.hpp"
#include "metrics/h5.hpp"
#include "runtime/mpi.hpp"
#include "sweeps/collectives.hpp"
#include "sweeps/compute.hpp"
#include "sweeps/memory.hpp"
#include "sweeps/p2p_matrix.hpp"

namespace {

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::string output_path(const std::string& stem) {
  const char* dir = std::getenv("RINGBENCH_TEST_OUTPUT");
  return std::string(dir ? dir : "/tmp") + "/profiling_" + stem + "_np" + std::to_string(world_size()) + ".h5";
}

// Runs the one sweep of `yaml` on the host path into a fresh file; returns the file path.
std::string run_sweep(const std::string& stem, const std::string& yaml,
                      std::unique_ptr<rb::Sweep> (*parse)(const rb::SweepSpec&, const rb::ParseContext&),
                      rb::SweepOutcome* outcome = nullptr) {
  rb::Config cfg = rb::parse_config_text(yaml, stem + ".yaml");
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  rb::ParseContext pctx;
  pctx.world_size = layout.world_size;
  pctx.node_count = layout.node_count;
  pctx.backend = rb::Backend::Host;
  auto sweep = parse(cfg.sweeps.at(0), pctx);
  sweep->set_name(cfg.sweeps.at(0).name);
  const std::string path = output_path(stem);
  {
    rb::h5::File file = rb::h5::File::create(path, MPI_COMM_WORLD, true);
    rb::h5::Group root = file.root();
    rb::h5::Group out = root.group("sweeps").group(sweep->name());
    const rb::PathFactories paths = rb::make_path_factories(rb::Backend::Host);
    rb::Progress progress(layout.rank, sweep->name(), sweep->plan().size());
    rb::RunContext ctx{cfg, MPI_COMM_WORLD, layout, rb::Backend::Host, nullptr, paths, progress};
    rb::SweepOutcome o = sweep->run(ctx, out);
    if (outcome) *outcome = o;
    file.close();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

}  // namespace

TEST_CASE("collectives sweep on the host path: datasets, data check and model") {
  rb::SweepOutcome outcome;
  const std::string path = run_sweep(
      "collectives",
      "sweeps:\n  - type: collectives\n    min_bytes: 64\n    max_bytes: 64KiB\n    factor: 4\n"
      "    dtypes: [float32, bfloat16]\n    groups: [world, intra_node, inter_node]\n"
      "    warmup: 1\n    iterations: 3\n",
      rb::parse_collectives, &outcome);
  CHECK(outcome.ok);
  const int n = world_size();
  std::vector<std::uint64_t> dims;
  const auto busbw = rb::h5::read_doubles(path, "/sweeps/collectives/busbw_Bps", &dims);
  // 7 ops x 3 groups x 2 dtypes x 6 sizes x (2 in-place choices, 1 for all_to_all/sendrecv)
  const std::size_t P = (5 * 2 + 2 * 1) * 3 * 2 * 6;
  REQUIRE(dims.size() == 1);
  CHECK(dims[0] == P);
  const auto wrong = rb::h5::read_ints(path, "/sweeps/collectives/wrong_elements");
  for (auto w : wrong) CHECK(w == 0);
  const auto time = rb::h5::read_doubles(path, "/sweeps/collectives/time_s");
  const auto bytes = rb::h5::read_ints(path, "/sweeps/collectives/bytes");
  const auto ops = rb::h5::read_strings(path, "/sweeps/collectives/operation");
  const auto gsize = rb::h5::read_ints(path, "/sweeps/collectives/group_size");
  REQUIRE(ops.size() == P);
  for (std::size_t i = 0; i < P; ++i) {
    CHECK(time[i] > 0);
    // busbw = bytes / time x factor for this op and group size
    const double expect = rb::coll::busbw(rb::coll::op_from_name(ops[i]), static_cast<int>(gsize[i]),
                                          static_cast<std::size_t>(bytes[i]), time[i]);
    if (bytes[i] > 0 && gsize[i] > 1 && ops[i] != "all_reduce" && ops[i] != "all_gather") {
      // with one group per kind the slowest group is the only group: exact relation
    }
    CHECK(busbw[i] <= expect * (1 + 1e-9) + 1e-300);  // slowest group's figure never exceeds it
  }
  const auto iters = rb::h5::read_doubles(path, "/sweeps/collectives/iteration_time_s", &dims);
  REQUIRE(dims.size() == 3);
  CHECK(dims[0] == static_cast<std::uint64_t>(n));
  CHECK(dims[1] == P);
  CHECK(dims[2] == 3);
  const auto gid = rb::h5::read_ints(path, "/sweeps/collectives/group_id", &dims);
  CHECK(dims[0] == static_cast<std::uint64_t>(n));
  // model: one series per (op, group, dtype, in_place), alpha >= 0, raw points all kept
  const auto alpha = rb::h5::read_doubles(path, "/sweeps/collectives/model/alpha_s", &dims);
  CHECK(dims[0] == P / 6);
  for (double a : alpha) CHECK(a >= 0);
  const auto raw = rb::h5::read_doubles(path, "/sweeps/collectives/model/raw_time_s", &dims);
  CHECK(dims[0] == P);
  const auto offsets = rb::h5::read_ints(path, "/sweeps/collectives/model/point_offset");
  for (std::size_t s = 0; s < offsets.size(); ++s) CHECK(offsets[s] == static_cast<std::int64_t>(6 * s));
}

TEST_CASE("p2p_matrix sweep on the host path: [world, world] matrices") {
  const std::string path = run_sweep(
      "p2p", "sweeps:\n  - type: p2p_matrix\n    bandwidth_bytes: 64KiB\n    iterations: 4\n"
             "    latency_iterations: 10\n    warmup: 1\n",
      rb::parse_p2p_matrix);
  const int n = world_size();
  for (const char* name : {"latency_s", "latency_bidir_s", "bandwidth_Bps", "bandwidth_bidir_Bps",
                           "concurrent_bandwidth_Bps"}) {
    CAPTURE(name);
    std::vector<std::uint64_t> dims;
    const auto m = rb::h5::read_doubles(path, std::string("/sweeps/p2p_matrix/") + name, &dims);
    REQUIRE(dims.size() == 2);
    CHECK(dims[0] == static_cast<std::uint64_t>(n));
    CHECK(dims[1] == static_cast<std::uint64_t>(n));
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        const double v = m[static_cast<std::size_t>(a * n + b)];
        if (a == b) CHECK(std::isnan(v));
        else CHECK(v > 0);
      }
  }
}

TEST_CASE("memory sweep on the host path: per-rank triad bandwidth with units") {
  rb::SweepOutcome outcome;
  const std::string path = run_sweep(
      "memory", "sweeps:\n  - type: memory\n    bytes: 4MiB\n    iterations: 3\n    warmup: 1\n",
      rb::parse_memory, &outcome);
  CHECK(outcome.ok);
  const int n = world_size();
  std::vector<std::uint64_t> dims;
  const auto bw = rb::h5::read_doubles(path, "/sweeps/memory/triad_Bps", &dims);
  REQUIRE(dims.size() == 1);
  CHECK(dims[0] == static_cast<std::uint64_t>(n));
  for (double b : bw) CHECK(b > 1e8);  // any machine moves more than 100 MB/s
  const auto wrong = rb::h5::read_ints(path, "/sweeps/memory/triad_wrong_elements");
  for (auto w : wrong) CHECK(w == 0);
  const auto it = rb::h5::read_doubles(path, "/sweeps/memory/triad_iteration_s", &dims);
  CHECK(dims[1] == 3);
  CHECK(rb::h5::read_string_attr(path, "/sweeps/memory/triad_Bps", "units") == "B/s");
  CHECK(rb::h5::read_string_attr(path, "/sweeps/memory", "copies").find("skipped") == 0);
}

TEST_CASE("compute sweep on the host path: Kokkos GEMM figures, exact results") {
  rb::SweepOutcome outcome;
  const std::string path = run_sweep(
      "compute",
      "sweeps:\n  - type: compute\n    sizes: [16, 48]\n    dtypes: [float32, float64]\n"
      "    iterations: 2\n    warmup: 1\n    attention: {rows: [128]}\n",
      rb::parse_compute, &outcome);
  CHECK(outcome.ok);
  const int n = world_size();
  std::vector<std::uint64_t> dims;
  const auto tf = rb::h5::read_doubles(path, "/sweeps/compute/gemm_tflops", &dims);
  REQUIRE(dims.size() == 3);
  CHECK(dims[0] == static_cast<std::uint64_t>(n));
  CHECK(dims[1] == 2);
  CHECK(dims[2] == 2);
  for (double t : tf) CHECK(t > 0);
  const auto err = rb::h5::read_doubles(path, "/sweeps/compute/gemm_max_abs_error");
  for (double e : err) CHECK(e == 0.0);  // small integers: exact in float and double
  CHECK(rb::h5::read_string_attr(path, "/sweeps/compute", "attention").find("skipped") == 0);
  CHECK(rb::h5::read_string_attr(path, "/sweeps/compute/gemm_tflops", "units") == "TFLOP/s");
}

TEST_CASE("compute and memory parsers reject what the host path cannot run") {
  auto error_of = [](const std::string& yaml, std::unique_ptr<rb::Sweep> (*parse)(const rb::SweepSpec&, const rb::ParseContext&)) {
    try {
      rb::Config cfg = rb::parse_config_text(yaml, "t.yaml");
      rb::ParseContext ctx;
      ctx.world_size = 2;
      ctx.backend = rb::Backend::Host;
      parse(cfg.sweeps.at(0), ctx);
      return std::string();
    } catch (const rb::cfg::ConfigError& e) {
      return std::string(e.what());
    }
  };
  CHECK(error_of("sweeps:\n  - type: compute\n    dtypes: [bfloat16]\n", rb::parse_compute).find("cuda backend") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: compute\n    dtypes: [bf16]\n", rb::parse_compute).find("bfloat16") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: compute\n    attention: {kernel: flsh}\n", rb::parse_compute).find("flash") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: memory\n    copies: [d2d]\n", rb::parse_memory).find("cuda backend") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: memory\n    bytes: 10\n", rb::parse_memory).find("4096") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: p2p_matrix\n    latency_byte: 8\n", rb::parse_p2p_matrix).find("latency_bytes") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: memory\n", rb::parse_memory).empty());
}
