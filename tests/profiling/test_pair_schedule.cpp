// p2p pair sets and their schedule (src/profiling/pair_schedule.*): counts by arithmetic equal
// the listed pairs; rounds are disjoint and cover each pair once; all pairs take 2(W-1) rounds.
#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "profiling/pair_schedule.hpp"

using rb::prof::Pair;
using rb::prof::PairSet;
using rb::prof::PairSpec;

namespace {

std::vector<int> block(int nodes, int per_node) {
  std::vector<int> node_of;
  for (int n = 0; n < nodes; ++n)
    for (int k = 0; k < per_node; ++k) node_of.push_back(n);
  return node_of;
}

// Every round has each rank at most once, and the rounds hold exactly `pairs` (as a set).
void check_rounds(const std::vector<std::vector<Pair>>& rounds, const std::vector<Pair>& pairs) {
  std::set<std::pair<int, int>> got, want;
  for (const auto& round : rounds) {
    std::set<int> busy;
    for (const Pair& p : round) {
      CHECK(busy.insert(p.sender).second);
      CHECK(busy.insert(p.receiver).second);
      CHECK(got.insert({p.sender, p.receiver}).second);  // no pair twice
    }
  }
  for (const Pair& p : pairs) want.insert({p.sender, p.receiver});
  CHECK(got == want);
}

// Every pair set's pairs listed on the layout `node_of` number what `count` makes of the set
// (the sample set: `sample`).
template <class Count>
void check_counts(const std::vector<int>& node_of, const char* sample, Count count) {
  for (const char* s : {"all", "intra_node", "node_leaders", "per_node_pair", sample}) {
    CAPTURE(s);
    const PairSpec spec = rb::prof::parse_pair_spec(s);
    CHECK(rb::prof::select_pairs(spec, node_of).size() == count(spec));
  }
}

}  // namespace

TEST_CASE("pair sets: arithmetic counts equal the listed pairs") {
  for (int nodes : {1, 2, 3, 5})
    for (int per_node : {1, 2, 4}) {
      CAPTURE(nodes);
      CAPTURE(per_node);
      check_counts(block(nodes, per_node), "sample:7", [&](const PairSpec& spec) {
        return rb::prof::count_pairs(spec, nodes, per_node);
      });
    }
  const auto node_of = block(4, 8);
  for (const Pair& p : rb::prof::select_pairs({PairSet::IntraNode}, node_of))
    CHECK(node_of[p.sender] == node_of[p.receiver]);
  // the same seed draws the same sample on every rank
  CHECK(rb::prof::select_pairs({PairSet::Sample, 50, 9}, node_of) ==
        rb::prof::select_pairs({PairSet::Sample, 50, 9}, node_of));
  CHECK(rb::prof::count_pairs({PairSet::All}, 128, 8) == 1024ull * 1023);
  CHECK_THROWS_WITH(
      rb::prof::parse_pair_spec("sample:0"),
      doctest::Contains("all | intra_node | node_leaders | per_node_pair | sample:N"));
  CHECK_THROWS(rb::prof::parse_pair_spec("every"));
  CHECK(rb::prof::to_string(rb::prof::parse_pair_spec("sample:12")) == "sample:12");
}

TEST_CASE("rounds: disjoint, complete; all pairs in 2(W-1) rounds (odd W: 2W)") {
  for (int world : {2, 3, 8, 9, 16}) {
    CAPTURE(world);
    const auto node_of = block(world, 1);
    const auto rounds = rb::prof::rounds_for({PairSet::All}, node_of);
    check_rounds(rounds, rb::prof::select_pairs({PairSet::All}, node_of));
    CHECK(rounds.size() == static_cast<std::size_t>(world % 2 ? 2 * world : 2 * (world - 1)));
  }
  const auto node_of = block(4, 8);
  for (const char* s : {"intra_node", "node_leaders", "per_node_pair", "sample:100"}) {
    CAPTURE(s);
    const PairSpec spec = rb::prof::parse_pair_spec(s);
    check_rounds(rb::prof::rounds_for(spec, node_of), rb::prof::select_pairs(spec, node_of));
  }
  // intra_node on 4 nodes of 8: the nodes' pairs run side by side, 2(8-1) rounds at most... by
  // first fit a few more; far fewer than the 224 pairs one by one
  CHECK(rb::prof::rounds_for({PairSet::IntraNode}, node_of).size() <= 32);
}

TEST_CASE("the default pair set by job size") {
  CHECK(rb::prof::default_pairs(64, 8).set == PairSet::All);
  CHECK(rb::prof::default_pairs(512, 64).set == PairSet::PerNodePair);
  const PairSpec big = rb::prof::default_pairs(1024, 128);
  CHECK(big.set == PairSet::Sample);
  CHECK(rb::prof::count_pairs(big, 128, 8) == 4096);
}

TEST_CASE("counts from node sizes (unequal nodes, cyclic placement) equal the listed pairs") {
  // cyclic: rank r on node r % nodes; the last nodes hold one rank fewer
  for (int world : {3, 5, 10, 13})
    for (int nodes : {1, 2, 3, 4}) {
      std::vector<int> node_of;
      for (int r = 0; r < world; ++r) node_of.push_back(r % nodes);
      CAPTURE(world);
      CAPTURE(nodes);
      for (const auto& layout : {node_of, rb::prof::block_layout(world, nodes)})
        check_counts(layout, "sample:9", [&](const PairSpec& spec) {
          return rb::prof::count_pairs(spec, rb::prof::node_sizes(layout));
        });
    }
  CHECK(rb::prof::block_layout(10, 3) == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2});
  CHECK(rb::prof::node_sizes({1, 0, 1, 0, 1}) == std::vector<int>{3, 2});  // node of rank 0 first
}

TEST_CASE("the tournament's round count by arithmetic; a sample of every pair is the tournament") {
  for (int world = 1; world <= 17; ++world) {
    CAPTURE(world);
    CHECK(rb::prof::tournament_rounds(world).size() == rb::prof::tournament_round_count(world));
  }
  CHECK(rb::prof::tournament_round_count(1024) == 2046);
  CHECK(rb::prof::covers_all_pairs({PairSet::Sample, 12}, 4));
  CHECK_FALSE(rb::prof::covers_all_pairs({PairSet::Sample, 11}, 4));
  CHECK(rb::prof::rounds_for({PairSet::Sample, 12}, block(4, 1)).size() == 6);
  // first fit stays fast at a job's scale: 4096 sampled pairs of 1,024 ranks in few rounds
  const auto rounds = rb::prof::rounds_for({PairSet::Sample, 4096}, block(128, 8));
  check_rounds(rounds, rb::prof::select_pairs({PairSet::Sample, 4096}, block(128, 8)));
  CHECK(rounds.size() < 40);
}
