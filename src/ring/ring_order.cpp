#include "ring/ring_order.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>

namespace rb::ring {

std::vector<std::vector<int>> form_rings(const std::vector<int>& node_of, int ring_size,
                                         RingOrder order) {
  const int world = static_cast<int>(node_of.size());
  if (ring_size < 1 || world % ring_size != 0)
    throw std::invalid_argument("ring size " + std::to_string(ring_size) +
                                " does not divide the world size " + std::to_string(world));
  std::vector<int> ranks(world);
  std::iota(ranks.begin(), ranks.end(), 0);
  if (order == RingOrder::NodeAware)  // node by node, world order inside a node
    std::stable_sort(ranks.begin(), ranks.end(),
                     [&](int a, int b) { return node_of[a] < node_of[b]; });
  std::vector<std::vector<int>> rings;
  for (int start = 0; start < world; start += ring_size)
    rings.emplace_back(ranks.begin() + start, ranks.begin() + start + ring_size);
  return rings;
}

int crossing_hops(const std::vector<int>& members, const std::vector<int>& node_of) {
  const std::size_t n = members.size();
  if (n < 2) return 0;
  int hops = 0;
  for (std::size_t i = 0; i < n; ++i) hops += node_of[members[i]] != node_of[members[(i + 1) % n]];
  return hops;
}

RingPlacement place_in_ring(int rank, const std::vector<int>& node_of, int ring_size,
                            RingOrder order) {
  const auto rings = form_rings(node_of, ring_size, order);
  RingPlacement p;
  for (std::size_t id = 0; id < rings.size(); ++id) {
    const auto it = std::find(rings[id].begin(), rings[id].end(), rank);
    if (it == rings[id].end()) continue;
    p.ring_id = static_cast<int>(id);
    p.ring_rank = static_cast<int>(it - rings[id].begin());
    p.members = rings[id];
    std::set<int> nodes;
    for (int m : p.members) nodes.insert(node_of[m]);
    p.nodes_spanned = static_cast<int>(nodes.size());
    p.crossing_hops = crossing_hops(p.members, node_of);
    return p;
  }
  throw std::invalid_argument("rank " + std::to_string(rank) + " is not in the world");
}

std::string spread_warning(const RingPlacement& p, const std::vector<int>& node_of) {
  if (p.members.empty() || p.nodes_spanned <= 1) return "";
  const int node = node_of[p.members.front()];
  const auto on_node = std::count(node_of.begin(), node_of.end(), node);
  if (static_cast<long>(p.members.size()) > on_node) return "";
  return "ring " + std::to_string(p.ring_id) + " of " + std::to_string(p.members.size()) +
         " ranks fits in one node but spans " + std::to_string(p.nodes_spanned) + " (" +
         std::to_string(p.crossing_hops) +
         " node-crossing hops): use ring_order: node_aware, "
         "or a ring size that divides the ranks per node";
}

RingOrder parse_ring_order(const std::string& name) {
  if (name == "node_aware") return RingOrder::NodeAware;
  if (name == "rank") return RingOrder::Rank;
  throw std::invalid_argument("unknown ring order '" + name + "' (node_aware | rank)");
}

const char* to_string(RingOrder order) {
  return order == RingOrder::NodeAware ? "node_aware" : "rank";
}

}  // namespace rb::ring
