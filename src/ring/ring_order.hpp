#pragma once
// Which ranks form each ring, and in what order (ring_order: node_aware | rank). A ring step
// ends with its slowest neighbour transfer, and a transfer between nodes is the slow one, so
// a ring should cross node boundaries as few times as it can: node_aware groups the ranks node
// by node (block or cyclic placement alike) before cutting them into rings; rank keeps world
// rank order (rank r in ring r / R), which under cyclic placement crosses nodes at every hop.
#include <string>
#include <vector>

namespace rb::ring {

enum class RingOrder { NodeAware, Rank };

struct RingPlacement {
  int ring_id = -1;          // which ring this rank is in (0..world/R-1)
  int ring_rank = -1;        // its position in the ring
  std::vector<int> members;  // world ranks of the ring, in ring order (member i sends to i+1)
  int nodes_spanned = 0;     // distinct nodes among the members
  int crossing_hops = 0;     // ring hops (including the wrap-around) between two nodes
};

// Every ring of `ring_size` ranks over the world, node_of[r] being world rank r's node.
// Requires world % ring_size == 0 (the sweep's config check).
std::vector<std::vector<int>> form_rings(const std::vector<int>& node_of, int ring_size,
                                         RingOrder order);

// The ring `rank` is in, with its members, nodes and node-crossing hops.
RingPlacement place_in_ring(int rank, const std::vector<int>& node_of, int ring_size,
                            RingOrder order);

// Hops i -> i+1 (and the last back to the first) whose two ranks are on different nodes.
int crossing_hops(const std::vector<int>& members, const std::vector<int>& node_of);

// The warning for a ring that would fit in one node (ring_size <= ranks on its first member's
// node) but spans several, or "" when it does not.
std::string spread_warning(const RingPlacement& p, const std::vector<int>& node_of);

RingOrder parse_ring_order(const std::string& name);  // "node_aware" | "rank"; throws otherwise
const char* to_string(RingOrder order);

}  // namespace rb::ring
