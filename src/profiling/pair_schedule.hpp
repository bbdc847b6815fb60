#pragma once
// Which ordered rank pairs a p2p matrix measures, and in which rounds (p2p_matrix.pairs).
// Measuring every ordered pair one after another is W(W-1) measurements: minutes at 64 ranks,
// hours at 512. A pair set chooses fewer (the pairs inside each node, one pair per node pair,
// node leaders, or a seeded sample), and a schedule measures disjoint pairs at the same time:
// in a round every rank is in at most one pair, so all W(W-1) ordered pairs take 2(W-1) rounds
// instead of W(W-1) (a round-robin tournament, each meeting played both ways).
#include <cstdint>
#include <string>
#include <vector>

namespace rb::prof {

enum class PairSet { All, IntraNode, NodeLeaders, PerNodePair, Sample };

struct PairSpec {
  PairSet set = PairSet::All;
  std::int64_t sample = 0;  // Sample: pairs drawn (without repeats)
  std::uint64_t seed = 1;   // Sample: the same seed draws the same pairs on every rank
};

struct Pair {
  int sender = -1;
  int receiver = -1;
  bool operator==(const Pair& o) const { return sender == o.sender && receiver == o.receiver; }
};

// "all" | "intra_node" | "node_leaders" | "per_node_pair" | "sample:N"; throws
// std::invalid_argument with the accepted forms otherwise.
PairSpec parse_pair_spec(const std::string& text);
std::string to_string(const PairSpec& spec);

// What a job of `world` ranks on `nodes` nodes measures without a `pairs:` key: every pair up to
// 64 ranks; one pair per ordered node pair (plus the pairs inside node 0) up to 64 nodes; a
// sample of 4096 pairs beyond.
PairSpec default_pairs(int world, int nodes);

// The ordered pairs of the set, sender-major order. node_of[r]: world rank r's node.
std::vector<Pair> select_pairs(const PairSpec& spec, const std::vector<int>& node_of);

// Their number from the layout alone (block placement, per_node ranks on each of nodes nodes),
// for plans and dry-runs of thousands of ranks without listing them.
std::uint64_t count_pairs(const PairSpec& spec, int nodes, int per_node);
// The same from the size of each node (nodes of unequal size; node 0 first).
std::uint64_t count_pairs(const PairSpec& spec, const std::vector<int>& node_sizes);

// The layout a plan assumes when it knows only the job's size: `world` ranks in blocks over
// `nodes` nodes, ceil(world / nodes) per node, the last node holding the rest.
std::vector<int> block_layout(int world, int nodes);
std::vector<int> node_sizes(const std::vector<int>& node_of);

// Whether a pair set is every ordered pair (the tournament's case): `all`, or a sample at least
// as large as the W(W-1) pairs there are.
bool covers_all_pairs(const PairSpec& spec, int world);
// The tournament's number of rounds, 2(W-1) for even W and 2W for odd (0 for one rank).
std::uint64_t tournament_round_count(int world);

// Rounds of disjoint pairs (no rank twice in a round) covering `pairs` once each (first fit).
std::vector<std::vector<Pair>> schedule_rounds(const std::vector<Pair>& pairs, int world);

// All W(W-1) ordered pairs in 2(W-1) rounds (W even; W-1 more for odd W): the circle method's
// W-1 rounds of W/2 meetings, each played one way and then the other.
std::vector<std::vector<Pair>> tournament_rounds(int world);

// The rounds of a pair set: the tournament for all pairs, first fit otherwise.
std::vector<std::vector<Pair>> rounds_for(const PairSpec& spec, const std::vector<int>& node_of);

}  // namespace rb::prof
