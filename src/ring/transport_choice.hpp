#pragma once
// Which RingTransport moves a ring's K/V: the `transport` key of ring_attention (nccl,
// copy_engine or auto; the host path has MPI only). Hop by hop: a hop whose two GPUs share a
// node and can reach each other's memory (CUDA IPC with peer access) goes by the copy engines,
// so no SM is spent on it; a hop between nodes goes by NCCL. A ring inside one node is all copy
// engines, a ring across nodes with some hops inside them is mixed (copy_engine+nccl), a ring
// whose every hop crosses nodes is NCCL. `auto` and `copy_engine` decide alike, except that
// copy_engine where no hop can take the copy engines is an error. The decision, and why, are
// recorded per point, and the hop into each rank per rank. Pure logic: the facts come from the
// run (each ring member's node and a collective peer-access probe, ring/ce_transport.hpp).
#include <optional>
#include <string>
#include <vector>

namespace rb::ring {

// Mixed: the copy engines on the hops inside a node, NCCL on the node-crossing ones.
enum class RingTransportKind { Mpi, Nccl, CopyEngine, Mixed };
std::string to_string(RingTransportKind kind);  // "mpi", "nccl", "copy_engine", "copy_engine+nccl"

// What the config asks for; Auto where the key is absent.
enum class TransportAsk { Auto, Nccl, CopyEngine };
std::optional<TransportAsk> transport_ask_from_string(const std::string& text);
std::string to_string(TransportAsk ask);  // "auto", "nccl", "copy_engine"
std::vector<std::string> transport_ask_names();

// Why a ring's ranks can or cannot use the copy engines, from a probe over the ring.
struct CopyEngineProbe {
  bool usable = false;
  std::string why_not;  // empty when usable, e.g. "rank 2's GPU cannot access rank 3's (no P2P)"
};

// This rank's two hops: from the previous ring rank into it, and from it to the next one.
struct HopLinks {
  bool in_local = true;   // the previous rank shares this rank's node
  bool out_local = true;  // the next rank shares this rank's node
};

struct TransportFacts {
  bool on_device = false;  // a GPU attention backend (else MPI on the host)
  int ring_size = 1;
  int nodes_spanned = 1;  // nodes the ring's ranks sit on
  int crossing_hops = 0;  // hops (the last back to the first included) between two nodes
  HopLinks links;
  std::optional<CopyEngineProbe> probe;  // absent where it was not needed (nor run)
};

// The ring's node facts, from each member's node in ring order (member i sends to i + 1).
void set_ring_nodes(TransportFacts& facts, const std::vector<int>& member_nodes, int ring_rank);

struct TransportDecision {
  RingTransportKind kind = RingTransportKind::Nccl;
  std::string reason;  // recorded per point: why this transport
  std::string error;   // non-empty: what was asked cannot run here (the point fails, saying so)
};

// Whether the decision needs the peer-access probe (a collective the caller runs first; it
// checks the hops inside a node only, facts.links saying which hop into a rank is one).
bool needs_copy_engine_probe(TransportAsk ask, const TransportFacts& facts);
TransportDecision decide_transport(TransportAsk ask, const TransportFacts& facts);
// What moves the hop into this rank under a decision: "copy_engine" or "nccl" for a mixed ring,
// the decision's kind otherwise (recorded per rank).
std::string hop_in_transport(const TransportDecision& d, const HopLinks& links);

}  // namespace rb::ring
