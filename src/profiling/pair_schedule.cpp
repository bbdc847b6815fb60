#include "profiling/pair_schedule.hpp"

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>

#include "names.hpp"

namespace rb::prof {
namespace {

// Node leaders: the lowest rank of each node, in node order.
std::vector<int> leaders(const std::vector<int>& node_of) {
  std::vector<int> first;
  std::set<int> seen;
  for (int r = 0; r < static_cast<int>(node_of.size()); ++r)
    if (seen.insert(node_of[r]).second) first.push_back(r);
  return first;
}

void all_ordered(const std::vector<int>& ranks, std::vector<Pair>& out) {
  for (int a : ranks)
    for (int b : ranks)
      if (a != b) out.push_back({a, b});
}

std::vector<Pair> sample_pairs(std::int64_t n, std::uint64_t seed, int world) {
  const std::uint64_t total = static_cast<std::uint64_t>(world) * (world - 1);
  std::vector<Pair> out;
  if (static_cast<std::uint64_t>(n) >= total) {
    std::vector<int> all(world);
    for (int r = 0; r < world; ++r) all[r] = r;
    all_ordered(all, out);
    return out;
  }
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> pick(0, world - 1);
  std::set<std::pair<int, int>> drawn;
  while (static_cast<std::int64_t>(drawn.size()) < n) {
    const int a = pick(gen), b = pick(gen);
    if (a != b) drawn.insert({a, b});
  }
  for (const auto& [a, b] : drawn) out.push_back({a, b});
  return out;
}

// The pair sets named by a word; a sample is "sample:N".
const std::pair<PairSet, const char*> kNamedSets[] = {{PairSet::All, "all"},
                                                      {PairSet::IntraNode, "intra_node"},
                                                      {PairSet::NodeLeaders, "node_leaders"},
                                                      {PairSet::PerNodePair, "per_node_pair"}};

}  // namespace

PairSpec parse_pair_spec(const std::string& text) {
  if (const auto set = find_value(kNamedSets, text)) return {*set};
  if (text.rfind("sample:", 0) == 0) {
    const std::string n = text.substr(7);
    if (!n.empty() && n.size() <= 9 && std::all_of(n.begin(), n.end(), ::isdigit) &&
        std::stoll(n) > 0)
      return {PairSet::Sample, std::stoll(n)};
  }
  throw std::invalid_argument(
      "expected all | intra_node | node_leaders | per_node_pair | "
      "sample:N (N pairs, 1 to 999999999), got '" +
      text + "'");
}

std::string to_string(const PairSpec& spec) {
  if (spec.set == PairSet::Sample) return "sample:" + std::to_string(spec.sample);
  return name_of(kNamedSets, spec.set);
}

PairSpec default_pairs(int world, int nodes) {
  if (world <= 64) return {PairSet::All};
  if (nodes <= 64) return {PairSet::PerNodePair};
  return {PairSet::Sample, 4096};
}

std::vector<Pair> select_pairs(const PairSpec& spec, const std::vector<int>& node_of) {
  const int world = static_cast<int>(node_of.size());
  std::vector<Pair> out;
  switch (spec.set) {
    case PairSet::All: {
      std::vector<int> all(world);
      for (int r = 0; r < world; ++r) all[r] = r;
      all_ordered(all, out);
      break;
    }
    case PairSet::IntraNode:
      for (int a = 0; a < world; ++a)
        for (int b = 0; b < world; ++b)
          if (a != b && node_of[a] == node_of[b]) out.push_back({a, b});
      break;
    case PairSet::NodeLeaders:
      all_ordered(leaders(node_of), out);
      break;
    case PairSet::PerNodePair: {  // the links inside one node, and every node pair once
      const std::vector<int> lead = leaders(node_of);
      for (int a = 0; a < world; ++a)
        for (int b = 0; b < world; ++b)
          if (a != b && node_of[a] == node_of[b] && node_of[a] == node_of[lead.front()])
            out.push_back({a, b});
      all_ordered(lead, out);
      break;
    }
    case PairSet::Sample:
      out = sample_pairs(spec.sample, spec.seed, world);
      break;
  }
  return out;
}

std::uint64_t count_pairs(const PairSpec& spec, int nodes, int per_node) {
  const std::uint64_t n = nodes, k = per_node, w = n * k;
  switch (spec.set) {
    case PairSet::All:
      return w * (w - 1);
    case PairSet::IntraNode:
      return n * k * (k - 1);
    case PairSet::NodeLeaders:
      return n * (n - 1);
    case PairSet::PerNodePair:
      return k * (k - 1) + n * (n - 1);
    case PairSet::Sample:
      return std::min<std::uint64_t>(spec.sample, w * (w - 1));
  }
  return 0;
}

std::uint64_t count_pairs(const PairSpec& spec, const std::vector<int>& node_sizes) {
  if (node_sizes.empty()) return 0;
  const auto ordered = [](std::uint64_t k) { return k * (k > 0 ? k - 1 : 0); };
  std::uint64_t w = 0, within = 0;
  for (int k : node_sizes) {
    w += static_cast<std::uint64_t>(k);
    within += ordered(static_cast<std::uint64_t>(k));
  }
  switch (spec.set) {
    case PairSet::All:
      return ordered(w);
    case PairSet::IntraNode:
      return within;
    case PairSet::NodeLeaders:
      return ordered(node_sizes.size());
    case PairSet::PerNodePair:
      return ordered(static_cast<std::uint64_t>(node_sizes.front())) + ordered(node_sizes.size());
    case PairSet::Sample:
      return std::min<std::uint64_t>(spec.sample, ordered(w));
  }
  return 0;
}

std::vector<int> block_layout(int world, int nodes) {
  const int per_node = (world + std::max(nodes, 1) - 1) / std::max(nodes, 1);
  std::vector<int> node_of(static_cast<std::size_t>(std::max(world, 0)));
  for (int r = 0; r < world; ++r) node_of[r] = r / std::max(per_node, 1);
  return node_of;
}

std::vector<int> node_sizes(const std::vector<int>& node_of) {
  // Nodes in the order of their lowest rank, as leaders() lists them (node 0 first).
  std::vector<int> order, size_of;
  for (int n : node_of) {
    if (n >= static_cast<int>(size_of.size())) size_of.resize(static_cast<std::size_t>(n) + 1, 0);
    if (size_of[n]++ == 0) order.push_back(n);
  }
  std::vector<int> sizes;
  for (int n : order) sizes.push_back(size_of[n]);
  return sizes;
}

bool covers_all_pairs(const PairSpec& spec, int world) {
  const std::uint64_t w = static_cast<std::uint64_t>(std::max(world, 0));
  return spec.set == PairSet::All ||
         (spec.set == PairSet::Sample &&
          static_cast<std::uint64_t>(spec.sample) >= w * (w > 0 ? w - 1 : 0));
}

std::uint64_t tournament_round_count(int world) {
  if (world < 2) return 0;
  return world % 2 == 0 ? 2u * static_cast<std::uint64_t>(world - 1)
                        : 2u * static_cast<std::uint64_t>(world);
}

std::vector<std::vector<Pair>> schedule_rounds(const std::vector<Pair>& pairs, int world) {
  // First fit: each pair goes to the first round where neither rank is busy. On all ordered
  // pairs listed sender-major this stays near the 2(W-1) rounds of a tournament.
  // first_free[rank]: every round before it has the rank busy, so the search starts there
  // (the same first fit, without rescanning full rounds: thousands of pairs stay fast).
  std::vector<std::vector<Pair>> rounds;
  std::vector<std::vector<char>> busy;  // busy[round][rank]
  std::vector<std::size_t> first_free(static_cast<std::size_t>(world), 0);
  const auto advance = [&](int rank) {
    std::size_t& f = first_free[rank];
    while (f < busy.size() && busy[f][rank]) ++f;
  };
  for (const Pair& p : pairs) {
    std::size_t r = std::max(first_free[p.sender], first_free[p.receiver]);
    while (r < rounds.size() && (busy[r][p.sender] || busy[r][p.receiver])) ++r;
    if (r == rounds.size()) {
      rounds.emplace_back();
      busy.emplace_back(static_cast<std::size_t>(world), 0);
    }
    rounds[r].push_back(p);
    busy[r][p.sender] = busy[r][p.receiver] = 1;
    advance(p.sender);
    advance(p.receiver);
  }
  return rounds;
}

std::vector<std::vector<Pair>> tournament_rounds(int world) {
  if (world < 2) return {};
  const int n = world % 2 == 0 ? world : world + 1;  // odd: a dummy rank n-1 sits out a round
  std::vector<std::vector<Pair>> there, back;
  for (int k = 0; k + 1 < n; ++k) {
    std::vector<Pair> round;
    const auto add = [&](int a, int b) {
      if (a < world && b < world) round.push_back({a, b});
    };
    add(k, n - 1);
    for (int i = 1; i < n / 2; ++i) add((k + i) % (n - 1), (k - i + n - 1) % (n - 1));
    std::vector<Pair> reversed;
    for (const Pair& p : round) reversed.push_back({p.receiver, p.sender});
    there.push_back(std::move(round));
    back.push_back(std::move(reversed));
  }
  there.insert(there.end(), back.begin(), back.end());
  return there;
}

std::vector<std::vector<Pair>> rounds_for(const PairSpec& spec, const std::vector<int>& node_of) {
  const int world = static_cast<int>(node_of.size());
  if (covers_all_pairs(spec, world)) return tournament_rounds(world);
  return schedule_rounds(select_pairs(spec, node_of), world);
}

}  // namespace rb::prof
