#include "ring/transport_choice.hpp"

namespace rb::ring {

std::string to_string(RingTransportKind kind) {
  switch (kind) {
    case RingTransportKind::Mpi:
      return "mpi";
    case RingTransportKind::Nccl:
      return "nccl";
    case RingTransportKind::CopyEngine:
      return "copy_engine";
  }
  return "?";
}

std::vector<std::string> transport_ask_names() {
  return {"auto", "nccl", "copy_engine"};
}

std::string to_string(TransportAsk ask) {
  switch (ask) {
    case TransportAsk::Auto:
      return "auto";
    case TransportAsk::Nccl:
      return "nccl";
    case TransportAsk::CopyEngine:
      return "copy_engine";
  }
  return "?";
}

std::optional<TransportAsk> transport_ask_from_string(const std::string& text) {
  if (text == "auto") return TransportAsk::Auto;
  if (text == "nccl") return TransportAsk::Nccl;
  if (text == "copy_engine") return TransportAsk::CopyEngine;
  return std::nullopt;
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
