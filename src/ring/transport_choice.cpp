#include "ring/transport_choice.hpp"

#include <utility>

#include "names.hpp"

namespace rb::ring {
namespace {

const std::pair<RingTransportKind, const char*> kTransports[] = {
    {RingTransportKind::Mpi, "mpi"},
    {RingTransportKind::Nccl, "nccl"},
    {RingTransportKind::CopyEngine, "copy_engine"}};
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

bool needs_copy_engine_probe(TransportAsk ask, const TransportFacts& facts) {
  return facts.on_device && facts.ring_size > 1 && facts.nodes_spanned == 1 &&
         ask != TransportAsk::Nccl;
}

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
  if (f.nodes_spanned > 1) {
    const std::string why = "the ring spans " + std::to_string(f.nodes_spanned) +
                            " nodes (copy engines reach GPUs of one node only)";
    if (ask == TransportAsk::CopyEngine)
      return {RingTransportKind::CopyEngine, "", "transport copy_engine: " + why};
    return {RingTransportKind::Nccl, "auto: " + why, ""};
  }
  if (!f.probe || !f.probe->usable) {
    const std::string why = f.probe ? f.probe->why_not : "peer access was not probed";
    if (ask == TransportAsk::CopyEngine)
      return {RingTransportKind::CopyEngine, "", "transport copy_engine: " + why};
    return {RingTransportKind::Nccl, "auto: " + why, ""};
  }
  return {
      RingTransportKind::CopyEngine,
      ask == TransportAsk::CopyEngine ? "asked for" : "auto: one node, peer access on every hop",
      ""};
}

}  // namespace rb::ring
