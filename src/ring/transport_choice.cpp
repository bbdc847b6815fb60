#include "ring/transport_choice.hpp"

#include <set>
#include <utility>

#include "names.hpp"

namespace rb::ring {
namespace {

const std::pair<RingTransportKind, const char*> kTransports[] = {
    {RingTransportKind::Mpi, "mpi"},
    {RingTransportKind::Nccl, "nccl"},
    {RingTransportKind::CopyEngine, "copy_engine"},
    {RingTransportKind::Mixed, "copy_engine+nccl"}};
const std::pair<TransportAsk, const char*> kAsks[] = {{TransportAsk::Auto, "auto"},
                                                      {TransportAsk::Nccl, "nccl"},
                                                      {TransportAsk::CopyEngine, "copy_engine"}};

}  // namespace

std::string to_string(RingTransportKind kind) {
  return name_of(kTransports, kind);
}

std::vector<std::string> transport_ask_names() {
  return names_of(kAsks);
}

std::string to_string(TransportAsk ask) {
  return name_of(kAsks, ask);
}

std::optional<TransportAsk> transport_ask_from_string(const std::string& text) {
  return find_value(kAsks, text);
}

void set_ring_nodes(TransportFacts& f, const std::vector<int>& member_nodes, int ring_rank) {
  const int n = static_cast<int>(member_nodes.size());
  f.ring_size = n;
  f.nodes_spanned =
      static_cast<int>(std::set<int>(member_nodes.begin(), member_nodes.end()).size());
  f.crossing_hops = 0;
  for (int i = 0; i < n; ++i) f.crossing_hops += member_nodes[i] != member_nodes[(i + 1) % n];
  const int me = member_nodes[ring_rank];
  f.links = {member_nodes[(ring_rank - 1 + n) % n] == me, member_nodes[(ring_rank + 1) % n] == me};
}

bool needs_copy_engine_probe(TransportAsk ask, const TransportFacts& facts) {
  return facts.on_device && facts.ring_size > 1 && facts.crossing_hops < facts.ring_size &&
         ask != TransportAsk::Nccl;
}

namespace {

// A GPU ring of several ranks, asked for auto or copy_engine: copy engines on every hop that
// can take them, NCCL on the rest, or why none can.
TransportDecision decide_copy_engine_hops(TransportAsk ask, const TransportFacts& f) {
  const std::string how = ask == TransportAsk::CopyEngine ? "asked for" : "auto";
  auto refuse = [&](const std::string& why) -> TransportDecision {
    if (ask == TransportAsk::CopyEngine)
      return {RingTransportKind::CopyEngine, "", "transport copy_engine: " + why};
    return {RingTransportKind::Nccl, "auto: " + why, ""};
  };
  if (f.crossing_hops >= f.ring_size)
    return refuse(
        "every hop of the ring crosses nodes (the copy engines reach GPUs of one node "
        "only)");
  if (!f.probe || !f.probe->usable)
    return refuse(f.probe ? f.probe->why_not : "peer access was not probed");
  if (f.crossing_hops == 0)
    return {RingTransportKind::CopyEngine,
            ask == TransportAsk::CopyEngine ? how : "auto: one node, peer access on every hop", ""};
  return {RingTransportKind::Mixed,
          how + ": copy engines on the " + std::to_string(f.ring_size - f.crossing_hops) +
              " hops inside nodes, NCCL on the " + std::to_string(f.crossing_hops) +
              " crossing nodes (the ring spans " + std::to_string(f.nodes_spanned) + " nodes)",
          ""};
}

}  // namespace

TransportDecision decide_transport(TransportAsk ask, const TransportFacts& f) {
  if (!f.on_device) {
    if (ask != TransportAsk::Auto)
      return {RingTransportKind::Mpi, "",
              "transport " + to_string(ask) +
                  " needs backend: cuda (the host path moves K/V with MPI)"};
    return {RingTransportKind::Mpi, "host path: MPI", ""};
  }
  if (ask == TransportAsk::Nccl) return {RingTransportKind::Nccl, "asked for", ""};
  if (f.ring_size == 1)  // nothing travels: the ring of one passes its block to itself
    return {
        ask == TransportAsk::CopyEngine ? RingTransportKind::CopyEngine : RingTransportKind::Nccl,
        "ring of one: nothing travels", ""};
  return decide_copy_engine_hops(ask, f);
}

std::string hop_in_transport(const TransportDecision& d, const HopLinks& links) {
  if (d.kind != RingTransportKind::Mixed) return to_string(d.kind);
  return links.in_local ? to_string(RingTransportKind::CopyEngine)
                        : to_string(RingTransportKind::Nccl);
}

}  // namespace rb::ring
