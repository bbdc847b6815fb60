// Ring membership and order (src/ring/ring_order.*): node-aware rings cross node boundaries as
// few times as possible under block and cyclic placement; rank order is world order.
#include <doctest/doctest.h>

#include <vector>

#include "ring/ring_order.hpp"

using rb::ring::RingOrder;

namespace {

// node_of[r] for `world` ranks on nodes of `per_node`, placed block (r / K) or cyclic (r % N).
std::vector<int> layout(int world, int per_node, bool cyclic) {
  const int nodes = world / per_node;
  std::vector<int> node_of(world);
  for (int r = 0; r < world; ++r) node_of[r] = cyclic ? r % nodes : r / per_node;
  return node_of;
}

int worst_crossings(const std::vector<int>& node_of, int ring_size, RingOrder order) {
  int worst = 0;
  for (const auto& ring : rb::ring::form_rings(node_of, ring_size, order))
    worst = std::max(worst, rb::ring::crossing_hops(ring, node_of));
  return worst;
}

}  // namespace

TEST_CASE("node-aware rings stay inside a node when they fit, under block and cyclic placement") {
  for (bool cyclic : {false, true}) {
    CAPTURE(cyclic);
    const auto node_of = layout(64, 8, cyclic);  // 8 nodes x 8 ranks
    for (int r : {2, 4, 8}) CHECK(worst_crossings(node_of, r, RingOrder::NodeAware) == 0);
    // a ring of 16 spans 2 nodes and crosses twice (there and back), of 64: 8 crossings
    CHECK(worst_crossings(node_of, 16, RingOrder::NodeAware) == 2);
    CHECK(worst_crossings(node_of, 64, RingOrder::NodeAware) == 8);
  }
  // rank order under cyclic placement: every hop of a ring of 8 crosses nodes
  const auto cyclic = layout(64, 8, true);
  CHECK(worst_crossings(cyclic, 8, RingOrder::Rank) == 8);
  // ... and under block placement it is the same as node-aware
  CHECK(worst_crossings(layout(64, 8, false), 16, RingOrder::Rank) == 2);
}

TEST_CASE("each rank's place: ring id, position, members, nodes, warning") {
  const auto node_of = layout(16, 4, true);  // 4 nodes x 4, cyclic: rank r on node r % 4
  const auto p = rb::ring::place_in_ring(5, node_of, 4, RingOrder::NodeAware);
  CHECK(p.members == std::vector<int>{1, 5, 9, 13});  // node 1's ranks
  CHECK(p.ring_id == 1);
  CHECK(p.ring_rank == 1);
  CHECK(p.nodes_spanned == 1);
  CHECK(p.crossing_hops == 0);
  CHECK(rb::ring::spread_warning(p, node_of).empty());
  const auto q = rb::ring::place_in_ring(5, node_of, 4, RingOrder::Rank);
  CHECK(q.members == std::vector<int>{4, 5, 6, 7});
  CHECK(q.nodes_spanned == 4);
  CHECK(q.crossing_hops == 4);
  CHECK(rb::ring::spread_warning(q, node_of).find("fits in one node but spans 4") !=
        std::string::npos);
  // a ring larger than a node is expected to span nodes: no warning
  const auto big = rb::ring::place_in_ring(0, node_of, 8, RingOrder::NodeAware);
  CHECK(big.nodes_spanned == 2);
  CHECK(rb::ring::spread_warning(big, node_of).empty());
  // every rank is in exactly one ring
  int seen = 0;
  for (const auto& ring : rb::ring::form_rings(node_of, 4, RingOrder::NodeAware))
    seen += ring.size();
  CHECK(seen == 16);
  CHECK_THROWS(rb::ring::form_rings(node_of, 3, RingOrder::NodeAware));
  CHECK(rb::ring::parse_ring_order("rank") == RingOrder::Rank);
  CHECK_THROWS(rb::ring::parse_ring_order("nodeaware"));
}
