// Which transport moves a ring's K/V (ring/transport_choice.hpp), hop by hop: the copy engines
// on the hops inside a node where peer access works, NCCL on the node-crossing ones; an
// explicit copy_engine where no hop can take them, or any GPU transport on the host path, is
// an error saying why.
#include <doctest/doctest.h>

#include "ring/transport_choice.hpp"

#include <vector>

using rb::ring::CopyEngineProbe;
using rb::ring::decide_transport;
using rb::ring::RingTransportKind;
using rb::ring::TransportAsk;
using rb::ring::TransportFacts;

namespace {
// ring_size ranks in ring order over `nodes` nodes of equal share (node-aware placement).
TransportFacts gpu(int ring_size, int nodes, std::optional<CopyEngineProbe> probe,
                   int ring_rank = 0) {
  TransportFacts f;
  f.on_device = true;
  std::vector<int> member_nodes;
  for (int i = 0; i < ring_size; ++i) member_nodes.push_back(i * nodes / ring_size);
  rb::ring::set_ring_nodes(f, member_nodes, ring_rank);
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
  CHECK(spans.reason == "auto: peer access was not probed");
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
  CHECK(rb::ring::needs_copy_engine_probe(TransportAsk::Auto, gpu(4, 2, std::nullopt)));
  // one rank per node: no hop can take the copy engines
  CHECK_FALSE(rb::ring::needs_copy_engine_probe(TransportAsk::Auto, gpu(4, 4, std::nullopt)));
  CHECK_FALSE(rb::ring::needs_copy_engine_probe(TransportAsk::Auto, gpu(1, 1, std::nullopt)));
  TransportFacts host;
  CHECK_FALSE(rb::ring::needs_copy_engine_probe(TransportAsk::Auto, host));
}

TEST_CASE("copy_engine asked where it cannot work is an error naming why") {
  const auto spans = decide_transport(TransportAsk::CopyEngine, gpu(4, 4, std::nullopt));
  CHECK(spans.error ==
        "transport copy_engine: every hop of the ring crosses nodes (the copy engines reach GPUs "
        "of one node only)");
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

TEST_CASE("a ring across nodes: copy engines inside them, NCCL between, recorded per hop") {
  const CopyEngineProbe ok{true, ""};
  for (TransportAsk ask : {TransportAsk::Auto, TransportAsk::CopyEngine}) {
    const auto d = decide_transport(ask, gpu(8, 2, ok));
    CHECK(d.kind == RingTransportKind::Mixed);
    CHECK(d.error.empty());
    CHECK(d.reason.find("copy engines on the 6 hops inside nodes, NCCL on the 2 crossing nodes") !=
          std::string::npos);
  }
  CHECK(rb::ring::to_string(RingTransportKind::Mixed) == "copy_engine+nccl");
  // ring ranks 0..3 on node 0, 4..7 on node 1: rank 0's hop in (from 7) crosses, rank 3's out
  const auto d = decide_transport(TransportAsk::Auto, gpu(8, 2, ok));
  const TransportFacts r0 = gpu(8, 2, ok, 0), r2 = gpu(8, 2, ok, 2), r3 = gpu(8, 2, ok, 3);
  CHECK_FALSE(r0.links.in_local);
  CHECK(r0.links.out_local);
  CHECK(r3.links.in_local);
  CHECK_FALSE(r3.links.out_local);
  CHECK(rb::ring::hop_in_transport(d, r0.links) == "nccl");
  CHECK(rb::ring::hop_in_transport(d, r2.links) == "copy_engine");
  CHECK(rb::ring::hop_in_transport(d, r3.links) == "copy_engine");
  CHECK(r0.crossing_hops == 2);
  CHECK(r0.nodes_spanned == 2);
  // an intra-node hop without peer access: auto falls back to NCCL, copy_engine refuses
  const CopyEngineProbe bad{false, "ring rank 2 cannot read ring rank 1's GPU"};
  CHECK(decide_transport(TransportAsk::Auto, gpu(8, 2, bad)).kind == RingTransportKind::Nccl);
  CHECK(decide_transport(TransportAsk::CopyEngine, gpu(8, 2, bad)).error ==
        "transport copy_engine: ring rank 2 cannot read ring rank 1's GPU");
  // every hop crosses: NCCL, saying why
  const auto apart = decide_transport(TransportAsk::Auto, gpu(4, 4, std::nullopt));
  CHECK(apart.kind == RingTransportKind::Nccl);
  CHECK(apart.reason.find("every hop of the ring crosses nodes") != std::string::npos);
  CHECK(rb::ring::hop_in_transport(apart, gpu(4, 4, std::nullopt).links) == "nccl");
}

TEST_CASE("transport names round-trip") {
  for (const std::string& name : rb::ring::transport_ask_names())
    CHECK(rb::ring::to_string(*rb::ring::transport_ask_from_string(name)) == name);
  CHECK_FALSE(rb::ring::transport_ask_from_string("nvlink").has_value());
  CHECK(rb::ring::to_string(RingTransportKind::CopyEngine) == "copy_engine");
}
