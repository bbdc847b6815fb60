// Which transport moves a ring's K/V (ring/transport_choice.hpp): auto takes the copy engines
// only where the ring stays in one node and every hop has peer access; an explicit
// copy_engine where that fails, or any GPU transport on the host path, is an error saying why.
#include <doctest/doctest.h>

#include "ring/transport_choice.hpp"

using rb::ring::CopyEngineProbe;
using rb::ring::decide_transport;
using rb::ring::RingTransportKind;
using rb::ring::TransportAsk;
using rb::ring::TransportFacts;

namespace {
TransportFacts gpu(int ring_size, int nodes, std::optional<CopyEngineProbe> probe) {
  TransportFacts f;
  f.on_device = true;
  f.ring_size = ring_size;
  f.nodes_spanned = nodes;
  f.probe = probe;
  return f;
}
}  // namespace

TEST_CASE("auto: copy engines on one node with peer access, NCCL otherwise, with the reason") {
  const auto one_node = decide_transport(TransportAsk::Auto, gpu(4, 1, CopyEngineProbe{true, ""}));
  CHECK(one_node.kind == RingTransportKind::CopyEngine);
  CHECK(one_node.error.empty());
  CHECK(one_node.reason == "auto: one node, peer access on every hop");
  const auto spans = decide_transport(TransportAsk::Auto, gpu(8, 2, std::nullopt));
  CHECK(spans.kind == RingTransportKind::Nccl);
  CHECK(spans.reason.find("the ring spans 2 nodes") != std::string::npos);
  const auto no_p2p = decide_transport(
      TransportAsk::Auto, gpu(2, 1,
                              CopyEngineProbe{false,
                                              "ring rank 1 cannot read ring rank 0's GPU (no peer "
                                              "access between devices 1 and 0)"}));
  CHECK(no_p2p.kind == RingTransportKind::Nccl);
  CHECK(no_p2p.reason.find("no peer access") != std::string::npos);
  CHECK(decide_transport(TransportAsk::Nccl, gpu(4, 1, CopyEngineProbe{true, ""})).kind ==
        RingTransportKind::Nccl);
}

TEST_CASE("the probe runs only where its answer can change the decision") {
  CHECK(rb::ring::needs_copy_engine_probe(TransportAsk::Auto, gpu(4, 1, std::nullopt)));
  CHECK(rb::ring::needs_copy_engine_probe(TransportAsk::CopyEngine, gpu(2, 1, std::nullopt)));
  CHECK_FALSE(rb::ring::needs_copy_engine_probe(TransportAsk::Nccl, gpu(4, 1, std::nullopt)));
  CHECK_FALSE(rb::ring::needs_copy_engine_probe(TransportAsk::Auto, gpu(4, 2, std::nullopt)));
  CHECK_FALSE(rb::ring::needs_copy_engine_probe(TransportAsk::Auto, gpu(1, 1, std::nullopt)));
  TransportFacts host;
  CHECK_FALSE(rb::ring::needs_copy_engine_probe(TransportAsk::Auto, host));
}

TEST_CASE("copy_engine asked where it cannot work is an error naming why") {
  const auto spans = decide_transport(TransportAsk::CopyEngine, gpu(8, 2, std::nullopt));
  CHECK(spans.error ==
        "transport copy_engine: the ring spans 2 nodes (copy engines reach GPUs of one node only)");
  const auto no_p2p = decide_transport(
      TransportAsk::CopyEngine,
      gpu(2, 1, CopyEngineProbe{false, "ring rank 1 cannot read ring rank 0's GPU"}));
  CHECK(no_p2p.error == "transport copy_engine: ring rank 1 cannot read ring rank 0's GPU");
  TransportFacts host;
  CHECK(decide_transport(TransportAsk::CopyEngine, host).error.find("needs backend: cuda") !=
        std::string::npos);
  CHECK(decide_transport(TransportAsk::Nccl, host).error.find("needs backend: cuda") !=
        std::string::npos);
  const auto h = decide_transport(TransportAsk::Auto, host);
  CHECK(h.kind == RingTransportKind::Mpi);
  CHECK(h.error.empty());
}

TEST_CASE("transport names round-trip") {
  for (const std::string& name : rb::ring::transport_ask_names())
    CHECK(rb::ring::to_string(*rb::ring::transport_ask_from_string(name)) == name);
  CHECK_FALSE(rb::ring::transport_ask_from_string("nvlink").has_value());
  CHECK(rb::ring::to_string(RingTransportKind::CopyEngine) == "copy_engine");
}
