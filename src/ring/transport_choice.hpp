#pragma once
// Which RingTransport moves a ring's K/V: the `transport` key of ring_attention (nccl,
// copy_engine or auto; the host path has MPI only). `auto` takes the copy engines where every
// hop of the ring stays in one node and every GPU can reach its neighbours' memory (CUDA IPC
// with peer access), so no SM is spent on the transfer; otherwise NCCL. The decision, and why,
// are recorded per point. Pure logic: the facts come from the run (ring placement and a
// collective peer-access probe, ring/ce_transport.hpp).
#include <optional>
#include <string>
#include <vector>

namespace rb::ring {

enum class RingTransportKind { Mpi, Nccl, CopyEngine };
std::string to_string(RingTransportKind kind);  // "mpi", "nccl", "copy_engine"

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

struct TransportFacts {
  bool on_device = false;  // a GPU attention backend (else MPI on the host)
  int ring_size = 1;
  int nodes_spanned = 1;                 // nodes the ring's ranks sit on
  std::optional<CopyEngineProbe> probe;  // absent where it was not needed (nor run)
};

struct TransportDecision {
  RingTransportKind kind = RingTransportKind::Nccl;
  std::string reason;  // recorded per point: why this transport
  std::string error;   // non-empty: what was asked cannot run here (the point fails, saying so)
};

// Whether the decision needs the peer-access probe (a collective the caller runs first).
bool needs_copy_engine_probe(TransportAsk ask, const TransportFacts& facts);
TransportDecision decide_transport(TransportAsk ask, const TransportFacts& facts);

}  // namespace rb::ring
