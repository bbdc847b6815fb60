// p2p_matrix's pair sets and rounds end to end on the host path (#17): each `pairs:` set run
// into a real HDF5 file on the simulated node layout of the environment
// (RINGBENCH_RANKS_PER_NODE, RINGBENCH_PLACEMENT), read back, and checked against the pairs the
// test derives itself from the ranks' nodes: every requested pair measured exactly once (both
// of its ranks hold a value), no other pair, and no rank in two pairs of one round. Plus the
// plan at 1,024 ranks: counted and estimated without listing a million pairs.
#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "app/estimate.hpp"
#include "config/config.hpp"
#include "metrics/h5.hpp"
#include "runtime/mpi.hpp"
#include "ring/host_sweep.hpp"
#include "sweeps/p2p_matrix.hpp"
#include "test_support.hpp"

namespace {

using PairSet = std::set<std::pair<int, int>>;

std::unique_ptr<rb::Sweep> parse(const std::string& keys, int world, int nodes) {
  const rb::Config cfg =
      rb::parse_config_text("sweeps:\n  - type: p2p_matrix\n" + keys, "p2p_schedule.yaml");
  rb::ParseContext pctx;
  pctx.world_size = world;
  pctx.node_count = nodes;
  pctx.backend = rb::Backend::Host;
  return rb::parse_p2p_matrix(cfg.sweeps.at(0), pctx);
}

// Runs a p2p_matrix sweep with `keys` (small messages) on every rank; returns the file.
// `planned_nodes` (0: the layout's) is the node count the plan is made for.
std::string run_p2p(const std::string& stem, const std::string& keys, const rb::RankLayout& layout,
                    int planned_nodes = 0) {
  const std::string yaml =
      "    bandwidth_bytes: 16KiB\n    iterations: 2\n    latency_iterations: 4\n"
      "    warmup: 1\n    concurrent: false\n" +
      keys;
  auto sweep =
      parse(yaml, layout.world_size, planned_nodes > 0 ? planned_nodes : layout.node_count);
  sweep->set_name("p2p_matrix");
  const rb::Config cfg =
      rb::parse_config_text("sweeps:\n  - type: p2p_matrix\n", "p2p_schedule.yaml");
  const std::string path = rb::test::test_path("profiling", stem);
  CHECK(rbtest::run_sweep_into(path, *sweep, cfg, layout).ok);
  return path;
}

std::vector<int> gather_nodes(const rb::RankLayout& layout) {
  std::vector<int> node_of(static_cast<std::size_t>(layout.world_size));
  MPI_Allgather(&layout.node_index, 1, MPI_INT, node_of.data(), 1, MPI_INT, MPI_COMM_WORLD);
  return node_of;
}

// The pairs each set names, written out here from its definition (docs/sweeps/p2p_matrix.md).
PairSet expected(const std::string& set, const std::vector<int>& node_of) {
  const int w = static_cast<int>(node_of.size());
  std::map<int, int> leader;  // node -> its lowest rank
  for (int r = w - 1; r >= 0; --r) leader[node_of[r]] = r;
  PairSet out;
  for (int a = 0; a < w; ++a)
    for (int b = 0; b < w; ++b) {
      if (a == b) continue;
      const bool same = node_of[a] == node_of[b];
      const bool leaders = leader[node_of[a]] == a && leader[node_of[b]] == b;
      if (set == "all" || (set == "intra_node" && same) || (set == "node_leaders" && leaders) ||
          (set == "per_node_pair" && (leaders || (same && node_of[a] == node_of[0]))))
        out.insert({a, b});
    }
  return out;
}

struct Measured {
  PairSet pairs;
  std::size_t points = 0;
  std::int64_t rounds_attr = 0;
  std::size_t max_in_round = 0;
};

// Reads the pair points back and checks each: measured by both its ranks (values > 0, NaN on
// every other rank), once; no rank twice in a round; pairs_in_round = the round's pair count.
Measured read_back(const std::string& path, int world) {
  const std::string g = "/sweeps/p2p_matrix/";
  const auto sender = rb::h5::read_ints(path, g + "points/sender");
  const auto receiver = rb::h5::read_ints(path, g + "points/receiver");
  const auto bw = rb::h5::read_doubles(path, g + "bandwidth_Bps");
  const auto lat = rb::h5::read_doubles(path, g + "latency_s");
  const auto round = rb::h5::read_doubles(path, g + "round");
  const auto in_round = rb::h5::read_doubles(path, g + "pairs_in_round");
  Measured m;
  m.points = sender.size();
  m.rounds_attr = rb::h5::read_int_attr(path, g, "rounds").at(0);
  std::map<int, std::set<int>> busy;          // round -> ranks
  std::map<int, std::size_t> count, claimed;  // round -> pairs, its pairs_in_round
  for (std::size_t p = 0; p < m.points; ++p) {
    CAPTURE(p);
    const int a = static_cast<int>(sender[p]), b = static_cast<int>(receiver[p]);
    CHECK(m.pairs.insert({a, b}).second);  // each pair once
    for (int r = 0; r < world; ++r) {
      const std::size_t at = static_cast<std::size_t>(r) * m.points + p;
      CAPTURE(r);
      if (r == a || r == b) {
        CHECK(bw[at] > 0);
        CHECK(lat[at] > 0);
      } else {
        CHECK(std::isnan(bw[at]));
      }
    }
    const std::size_t sa = static_cast<std::size_t>(a) * m.points + p,
                      sb = static_cast<std::size_t>(b) * m.points + p;
    REQUIRE(round[sa] == round[sb]);
    const int r = static_cast<int>(round[sa]);
    CHECK(busy[r].insert(a).second);  // no rank in two pairs of one round
    CHECK(busy[r].insert(b).second);
    ++count[r];
    claimed[r] = static_cast<std::size_t>(in_round[sa]);
  }
  for (const auto& [r, n] : count) {
    CHECK(claimed[r] == n);
    m.max_in_round = std::max(m.max_in_round, n);
  }
  CHECK(count.size() == static_cast<std::size_t>(m.rounds_attr));
  return m;
}

}  // namespace

TEST_CASE("p2p_matrix pairs: every requested pair once, no rank twice in a round") {
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  const int w = layout.world_size;
  const std::vector<int> node_of = gather_nodes(layout);
  for (const std::string set : {"all", "intra_node", "node_leaders", "per_node_pair"}) {
    CAPTURE(set);
    const std::string path = run_p2p("p2p_" + set, "    pairs: " + set + "\n", layout);
    const Measured m = read_back(path, w);
    CHECK(m.pairs == expected(set, node_of));
    // the plan counted the same points (the simulated nodes are equal here)
    if (w % layout.node_count == 0)
      CHECK(parse("    pairs: " + set + "\n    concurrent: false\n", w, layout.node_count)
                ->point_count() == m.points);
  }
  // Every pair of 4 ranks in 2(4-1) = 6 rounds of 2 pairs at once; serial: one pair per round.
  const Measured all = read_back(run_p2p("p2p_all_rounds", "    pairs: all\n", layout), w);
  if (w == 4) {
    CHECK(all.rounds_attr == 6);
    CHECK(all.max_in_round == 2);
  }
  const Measured serial =
      read_back(run_p2p("p2p_serial", "    pairs: all\n    schedule: serial\n", layout), w);
  CHECK(serial.pairs == expected("all", node_of));
  CHECK(serial.max_in_round == 1);
  CHECK(static_cast<std::size_t>(serial.rounds_attr) == serial.points);
  // A sample: N distinct pairs, the same ones on every rank (the file agrees with itself above)
  // and for the same seed.
  const Measured s1 =
      read_back(run_p2p("p2p_sample", "    pairs: sample:3\n    seed: 7\n", layout), w);
  const Measured s2 =
      read_back(run_p2p("p2p_sample2", "    pairs: sample:3\n    seed: 7\n", layout), w);
  CHECK(s1.pairs.size() == std::min<std::size_t>(3, static_cast<std::size_t>(w * (w - 1))));
  CHECK(s1.pairs == s2.pairs);
}

TEST_CASE("p2p_matrix on a layout the plan did not assume: the real layout's pairs") {
  // Planned for one node (intra_node: every pair), run on the simulated nodes: the run gathers
  // the ranks' nodes and measures their pairs; progress stays within the plan's count.
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  const std::vector<int> node_of = gather_nodes(layout);
  const Measured m =
      read_back(run_p2p("p2p_other_plan", "    pairs: intra_node\n", layout, 1), layout.world_size);
  CHECK(m.pairs == expected("intra_node", node_of));
}

TEST_CASE("p2p_matrix config: pairs, seed and schedule errors name the key") {
  const auto err = [](const std::string& keys) {
    return rb::test::error_of([&] { parse(keys, 8, 2); });
  };
  CHECK(err("    pairs: every\n").find("pairs") != std::string::npos);
  CHECK(err("    pairs: every\n").find("sample:N") != std::string::npos);
  CHECK(err("    pairs: sample:0\n").find("p2p_schedule.yaml:3:") != std::string::npos);
  CHECK(err("    pairs: sample:0\n").find("sweeps[0].pairs") != std::string::npos);
  CHECK(err("    pairs: all\n    seed: 3\n").find("seed") != std::string::npos);
  CHECK(err("    schedule: parallel\n").find("serial") != std::string::npos);
  CHECK(err("    pairs: sample:10\n    seed: 3\n    schedule: serial\n").empty());
  CHECK(err("    seed: 3\n").empty());  // kept for the sampled default of large jobs
}

TEST_CASE("p2p_matrix plan at 1,024 ranks: counted by arithmetic, within minutes") {
  const rb::CostAssumptions cuda = rb::cost_assumptions(rb::Backend::Cuda);
  const auto t0 = std::chrono::steady_clock::now();
  // inputs/large.yaml's p2p_matrix on 128 nodes of 8: the default pair set samples 4096 pairs
  const auto big = parse("    latency_bytes: 8\n    bandwidth_bytes: 256MiB\n", 1024, 128);
  // and above 64 ranks a sample of the 1023 shifts: 64 evenly spaced and the powers of two
  CHECK(big->point_count() == 4096u + 73u);
  const double s = big->estimated_seconds(cuda);
  CHECK(s < 600);
  CHECK(big->iterations_text().find("pairs sample:4096") != std::string::npos);
  CHECK(big->iterations_text().find("; 73 of 1023 shifts") != std::string::npos);
  // 8 rows per point above 8 ranks: the output grows with the points, not with the ranks
  CHECK(big->estimated_output_bytes() < (8u << 20));
  // every pair, asked for: a million points counted, and the tournament's 2046 rounds estimated,
  // without listing them
  const auto all = parse("    pairs: all\n    bandwidth_bytes: 256MiB\n", 1024, 128);
  CHECK(all->point_count() == 1024u * 1023u + 73u);
  CHECK(all->estimated_output_bytes() > 0);  // by arithmetic too
  CHECK(all->iterations_text().find("in 2046 rounds") != std::string::npos);
  // 512 pairs at once in every round: the rounds cost well under a hundredth of one by one
  const double serial =
      parse("    pairs: all\n    bandwidth_bytes: 256MiB\n    schedule: serial\n", 1024, 128)
          ->estimated_seconds(cuda);
  CHECK(all->estimated_seconds(cuda) * 100 < serial);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5.0);
  // 8 nodes of 8 ranks: every pair by default; per_node_pair above 64 ranks
  CHECK(parse("", 64, 8)->iterations_text().find("pairs all") != std::string::npos);
  CHECK(parse("", 128, 16)->iterations_text().find("pairs per_node_pair") != std::string::npos);
}
