// Profiling sweeps end to end on the host path: parse a config, run the sweep into a real
// parallel HDF5 file, read the points table back (schema v2: points/<key> [P], metrics
// [world, P, ...]) and check shapes, values, NaN where a rank measured nothing, and that the
// data checks passed. Runs at 1-4 ranks.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "metrics/h5.hpp"
#include "runtime/mpi.hpp"
#include "profiling/collective_table.hpp"
#include "sweeps/collectives.hpp"
#include "sweeps/compute.hpp"
#include "sweeps/host_pingpong.hpp"
#include "sweeps/memory.hpp"
#include "sweeps/p2p_matrix.hpp"
#include "profiling/groups.hpp"
#include "ring/host_sweep.hpp"
#include "test_support.hpp"

namespace {

// Runs the one sweep of `yaml` on the host path into a fresh file, checks that it succeeded
// (data checks included) and returns the file path. With `cache`, the sweep takes its groups'
// communicators from it, as the driver's sweeps take the run's.
std::string run_sweep(const std::string& stem, const std::string& yaml,
                      std::unique_ptr<rb::Sweep> (*parse)(const rb::SweepSpec&,
                                                          const rb::ParseContext&),
                      rb::groups::GroupCache* cache = nullptr) {
  rb::Config cfg = rb::parse_config_text(yaml, stem + ".yaml");
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  rb::ParseContext pctx;
  pctx.world_size = layout.world_size;
  pctx.node_count = layout.node_count;
  pctx.backend = rb::Backend::Host;
  auto sweep = parse(cfg.sweeps.at(0), pctx);
  sweep->set_name(cfg.sweeps.at(0).name);
  const std::string path = rb::test::test_path("profiling", stem);
  const rb::SweepOutcome o =
      rbtest::run_sweep_into(path, *sweep, cfg, layout, rb::Backend::Host, nullptr, cache);
  CAPTURE(o.failure);
  CHECK(o.ok);
  return path;
}

// The dataset's shape must be `dims` ([world, points, ...] for a metric).
void require_shape(const std::string& path, const std::string& dataset,
                   const std::vector<std::size_t>& dims) {
  std::vector<std::uint64_t> got;
  rb::h5::read_doubles(path, dataset, &got);
  CAPTURE(dataset);
  REQUIRE(got == std::vector<std::uint64_t>(dims.begin(), dims.end()));
}

}  // namespace

TEST_CASE("collectives sweep on the host path: points table, data check and model") {
  const std::string path = run_sweep(
      "collectives",
      "sweeps:\n  - type: collectives\n    min_bytes: 64\n    max_bytes: 64KiB\n    factor: 4\n"
      "    dtypes: [float32, bfloat16]\n    groups: [world, intra_node, inter_node]\n"
      "    warmup: 1\n    iterations: 3\n",
      rb::parse_collectives);
  const std::string g = "/sweeps/collectives/";
  const std::size_t n = static_cast<std::size_t>(rb::test::world());
  // 7 ops x 3 groups x 2 dtypes x 6 sizes x (2 in-place choices, 1 for all_to_all/sendrecv)
  const std::size_t P = (5 * 2 + 2 * 1) * 3 * 2 * 6;
  CHECK(rb::h5::read_int_attr(path, "/sweeps/collectives", "points").at(0) ==
        static_cast<std::int64_t>(P));
  const auto ops = rb::h5::read_strings(path, g + "points/operation");
  const auto size = rb::h5::read_ints(path, g + "points/message_size_bytes");
  REQUIRE(ops.size() == P);
  REQUIRE(size.size() == P);
  CHECK(rb::h5::read_string_attr(path, g + "points/operation", "role") == "key");
  require_shape(path, g + "busbw_Bps", {n, P});
  require_shape(path, g + "iteration_time_s", {n, P, 3});
  for (auto w : rb::h5::read_ints(path, g + "wrong_elements")) CHECK(w == 0);
  const auto time = rb::h5::read_doubles(path, g + "time_s");
  const auto group_time = rb::h5::read_doubles(path, g + "group_time_s");
  const auto busbw = rb::h5::read_doubles(path, g + "busbw_Bps");
  const auto bytes = rb::h5::read_ints(path, g + "size_bytes");
  const auto gsize = rb::h5::read_ints(path, g + "group_size");
  for (std::size_t i = 0; i < n * P; ++i) {
    CHECK(time[i] > 0);
    CHECK(group_time[i] >= time[i]);
    // busbw = size / group time x factor for this op and group size
    const std::size_t p = i % P;
    const double expect =
        rb::coll::busbw(rb::coll::op_from_name(ops[p]), static_cast<int>(gsize[i]),
                        static_cast<std::size_t>(bytes[i]), group_time[i]);
    CHECK(busbw[i] == doctest::Approx(expect));
    CHECK(bytes[i] <= size[p]);
  }
  // model: one series per (op, group, dtype, in_place), alpha >= 0, the same row on every rank
  const std::size_t S = P / 6;
  require_shape(path, g + "model/alpha_s", {n, S});
  CHECK(rb::h5::read_strings(path, g + "model/points/transport").at(0) == "mpi");
  const auto alpha = rb::h5::read_doubles(path, g + "model/alpha_s");
  for (std::size_t i = 0; i < n * S; ++i) {
    if (!std::isnan(alpha[i])) CHECK(alpha[i] >= 0);
    CHECK((alpha[i] == alpha[i % S] || (std::isnan(alpha[i]) && std::isnan(alpha[i % S]))));
  }
  for (auto k : rb::h5::read_ints(path, g + "model/fit_points")) CHECK(k == 6);
}

TEST_CASE("collectives sweeps share the run's group communicators (one per member list)") {
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  // The member lists the three kinds have here (world, intra_node and inter_node can coincide:
  // one node makes intra_node the world), from groups of their own.
  std::set<std::vector<int>> distinct;
  for (const char* text : {"world", "intra_node", "inter_node"}) {
    rb::groups::Spec spec;
    REQUIRE(rb::groups::parse_spec(text, &spec).empty());
    const rb::groups::Group g = rb::groups::make_group(spec, MPI_COMM_WORLD, layout);
    std::vector<int> members(static_cast<std::size_t>(g.size));
    MPI_Allgather(&layout.rank, 1, MPI_INT, members.data(), 1, MPI_INT, g.get());
    distinct.insert(members);
  }
  rb::groups::GroupCache cache;
  const std::string head =
      "sweeps:\n  - type: collectives\n    min_bytes: 64\n    max_bytes: 1KiB\n    factor: 4\n"
      "    operations: [all_reduce]\n    warmup: 1\n    iterations: 2\n";
  run_sweep("collectives_cache_a", head + "    groups: [world, intra_node]\n",
            rb::parse_collectives, &cache);
  const std::size_t after_first = cache.created();
  CHECK(after_first >= 1);
  CHECK(after_first <= 2);
  // The second sweep asks for both again and one more: only inter_node can be new.
  run_sweep("collectives_cache_b", head + "    groups: [intra_node, inter_node, world]\n",
            rb::parse_collectives, &cache);
  CHECK(cache.created() == distinct.size());
  // The cached communicators are the ones make_group builds: same rank, size and members.
  for (const char* text : {"world", "intra_node", "inter_node"}) {
    CAPTURE(text);
    rb::groups::Spec spec;
    REQUIRE(rb::groups::parse_spec(text, &spec).empty());
    const rb::groups::Group own = rb::groups::make_group(spec, MPI_COMM_WORLD, layout);
    const rb::groups::Group cached = cache.group(spec, MPI_COMM_WORLD, layout);
    CHECK(cached.rank == own.rank);
    CHECK(cached.size == own.size);
    CHECK(cached.id == own.id);
    std::vector<int> members(static_cast<std::size_t>(cached.size));
    MPI_Allgather(&layout.rank, 1, MPI_INT, members.data(), 1, MPI_INT, cached.get());
    CHECK(members == cached.comms->members);
  }
  CHECK(cache.created() == distinct.size());  // asking again made nothing
}

TEST_CASE("p2p_matrix sweep on the host path: one point per pair and per shift") {
  const std::string path =
      run_sweep("p2p",
                "sweeps:\n  - type: p2p_matrix\n    bandwidth_bytes: 64KiB\n    iterations: 4\n"
                "    latency_iterations: 10\n    warmup: 1\n",
                rb::parse_p2p_matrix);
  const int n = rb::test::world();
  const std::size_t pairs = static_cast<std::size_t>(n * (n - 1)),
                    P = pairs + static_cast<std::size_t>(n - 1);
  const std::string g = "/sweeps/p2p_matrix/";
  const auto sender = rb::h5::read_ints(path, g + "points/sender");
  const auto receiver = rb::h5::read_ints(path, g + "points/receiver");
  const auto shift = rb::h5::read_ints(path, g + "points/shift");
  REQUIRE(sender.size() == P);
  for (const char* name : {"latency_s", "latency_bidir_s", "bandwidth_Bps", "bandwidth_bidir_Bps",
                           "concurrent_bandwidth_Bps"}) {
    CAPTURE(name);
    require_shape(path, g + name, {static_cast<std::size_t>(n), P});
    const auto m = rb::h5::read_doubles(path, g + name);
    const bool concurrent = std::string(name) == "concurrent_bandwidth_Bps";
    const bool bidir = std::string(name).find("bidir") != std::string::npos;
    for (std::size_t p = 0; p < P; ++p) {
      CHECK(shift[p] >= 1);
      for (int r = 0; r < n; ++r) {
        const double v = m[static_cast<std::size_t>(r) * P + p];
        const bool in_pair = sender[p] == r || receiver[p] == r;
        bool measured =
            p < pairs ? !concurrent && in_pair && (!bidir || sender[p] < receiver[p]) : concurrent;
        CAPTURE(p);
        CAPTURE(r);
        if (measured)
          CHECK(v > 0);
        else
          CHECK(std::isnan(v));
      }
    }
  }
}

TEST_CASE("memory sweep on the host path: per-rank triad bandwidth with units") {
  const std::string path = run_sweep(
      "memory", "sweeps:\n  - type: memory\n    bytes: 4MiB\n    iterations: 3\n    warmup: 1\n",
      rb::parse_memory);
  const std::size_t n = static_cast<std::size_t>(rb::test::world());
  const std::string g = "/sweeps/memory/";
  CHECK(rb::h5::read_strings(path, g + "points/kind") == std::vector<std::string>{"triad"});
  require_shape(path, g + "bandwidth_Bps", {n, 1});
  for (double b : rb::h5::read_doubles(path, g + "bandwidth_Bps"))
    CHECK(b > 1e8);  // any machine moves more than 100 MB/s
  for (auto w : rb::h5::read_ints(path, g + "wrong_elements")) CHECK(w == 0);
  for (auto m : rb::h5::read_ints(path, g + "moved_bytes")) CHECK(m == 3 * (4 << 20));
  require_shape(path, g + "iteration_time_s", {n, 1, 3});
  CHECK(rb::h5::read_string_attr(path, g + "bandwidth_Bps", "units") == "B/s");
  CHECK(rb::h5::read_string_attr(path, "/sweeps/memory", "copies").find("skipped") == 0);
}

TEST_CASE("compute sweep on the host path: Kokkos GEMM figures, exact results") {
  const std::string path =
      run_sweep("compute",
                "sweeps:\n  - type: compute\n    sizes: [16, 48]\n    dtypes: [float32, float64]\n"
                "    iterations: 2\n    warmup: 1\n    attention: {rows: [128]}\n",
                rb::parse_compute);
  const std::size_t n = static_cast<std::size_t>(rb::test::world());
  const std::string g = "/sweeps/compute/";
  CHECK(rb::h5::read_strings(path, g + "points/dtype") ==
        std::vector<std::string>{"float32", "float32", "float64", "float64"});
  CHECK(rb::h5::read_ints(path, g + "points/size") == std::vector<std::int64_t>{16, 48, 16, 48});
  CHECK(rb::h5::read_strings(path, g + "points/engine").at(0) == "kokkos");
  require_shape(path, g + "rate_tflops", {n, 4});
  require_shape(path, g + "iteration_time_s", {n, 4, 2});
  for (double t : rb::h5::read_doubles(path, g + "rate_tflops")) CHECK(t > 0);
  for (double e : rb::h5::read_doubles(path, g + "max_abs_error"))
    CHECK(e == 0.0);  // small integers: exact
  CHECK(rb::h5::read_string_attr(path, "/sweeps/compute", "attention").find("skipped") == 0);
  CHECK(rb::h5::read_string_attr(path, g + "rate_tflops", "units") == "TFLOP/s");
}

TEST_CASE("host_pingpong sweep: one point per message size, every rank pings its neighbour") {
  const std::string path = run_sweep("pingpong",
                                     "sweeps:\n  - type: host_pingpong\n    message_sizes: [8, "
                                     "4096]\n    iterations: 3\n    warmup: 1\n",
                                     rb::parse_host_pingpong);
  const int n = rb::test::world();
  const std::string g = "/sweeps/host_pingpong/";
  CHECK(rb::h5::read_ints(path, g + "points/message_size_bytes") ==
        std::vector<std::int64_t>{8, 4096});
  require_shape(path, g + "one_way_time_s", {static_cast<std::size_t>(n), 2, 3});
  for (double t : rb::h5::read_doubles(path, g + "one_way_time_s")) CHECK(t > 0);
  for (double b : rb::h5::read_doubles(path, g + "bandwidth_Bps")) CHECK(b > 0);
  for (auto c : rb::h5::read_ints(path, g + "corrupt_echo")) CHECK(c == 0);
  const auto partner = rb::h5::read_ints(path, g + "partner_rank");
  for (int r = 0; r < n; ++r) CHECK(partner[static_cast<std::size_t>(r) * 2] == (r + 1) % n);
}

TEST_CASE("compute and memory parsers reject what the host path cannot run") {
  auto error_of = [](const std::string& yaml, std::unique_ptr<rb::Sweep> (*parse)(
                                                  const rb::SweepSpec&, const rb::ParseContext&)) {
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
  CHECK(error_of("sweeps:\n  - type: compute\n    dtypes: [bfloat16]\n", rb::parse_compute)
            .find("cuda backend") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: compute\n    dtypes: [bf16]\n", rb::parse_compute)
            .find("dtype bf16 needs the cuda backend") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: compute\n    dtypes: [bfloat61]\n", rb::parse_compute)
            .find("did you mean 'bfloat16'?") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: compute\n    dtypes: [fp64, float32]\n", rb::parse_compute)
            .empty());
  CHECK(error_of("sweeps:\n  - type: compute\n    attention: {kernel: flsh}\n", rb::parse_compute)
            .find("flash") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: memory\n    copies: [d2d]\n", rb::parse_memory)
            .find("cuda backend") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: memory\n    bytes: 10\n", rb::parse_memory).find("4096") !=
        std::string::npos);
  CHECK(error_of("sweeps:\n  - type: p2p_matrix\n    latency_byte: 8\n", rb::parse_p2p_matrix)
            .find("latency_bytes") != std::string::npos);
  CHECK(error_of("sweeps:\n  - type: memory\n", rb::parse_memory).empty());
}
