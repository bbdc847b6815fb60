#pragma once
// The hybrid scheme (USP: Ulysses inside, ring across): a group of R ranks is cut into R / U
// Ulysses subgroups of U consecutive ranks (with node-aware rings: within a node). One
// all-to-all inside each subgroup turns the members' sequence shards into heads / U of the
// heads over the subgroup's rows together; the members with the same place in their subgroups
// then run the ring across the subgroups on those heads ("the inner ring": R / U ranks, the
// same layout, each holding U shards' rows); an all-to-all brings O and LSE back. The backward
// mirrors it. For the layout to survive, a subgroup's rows must be one inner-ring rank's rows:
// true for contiguous and zigzag (consecutive ranks hold consecutive chunks), not for striped
// (hybrid_problem_error says so).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ring/backend_buffer.hpp"
#include "ring/cp_attention.hpp"
#include "ring/group_transport.hpp"
#include "ring/head_exchange.hpp"
#include "ring/ring_attention.hpp"
#include "ring/sharded_scheme.hpp"
#include "ring/transport.hpp"

namespace rb::ring {

// Empty when p can run as hybrid with Ulysses degree u; otherwise why not.
std::string hybrid_problem_error(const Problem& p, int u);
// The inner ring's problem: heads / u (and K/V heads / u) over ring size R / u, same layout.
Problem hybrid_inner_problem(const Problem& p, int u);

class HybridAttention final : public ShardedScheme {
 public:
  // ring: the transport across the subgroups (this rank's place m in its subgroup, ring rank =
  // its subgroup's index); heads: the transport inside the subgroup (rank m of u). Allocates
  // every buffer (throws attn::OutOfMemory); throws std::invalid_argument with
  // hybrid_problem_error.
  HybridAttention(const Problem& p, int ulysses_degree, attn::AttentionBackend& backend,
                  RingTransport& ring, GroupTransport& heads, bool with_backward);

  void forward() override;
  void backward() override;
  std::uint64_t bytes_sent() const override;
  void reset_bytes_sent() override;
  Scheme scheme() const override { return Scheme::Hybrid; }

 private:
  // The inner ring's steps in the first R / U entries (of R), the all-to-alls' time added to
  // step 0's wait.
  void steps_from_ring(const StepTimes& inner, double exchange_s, StepTimes& out) const;

  Problem inner_;
  int u_;
  std::unique_ptr<RingAttention> ring_;
  std::unique_ptr<HeadExchange> heads_;
  BackendBuffer send_, recv_;
  std::uint64_t bytes_at_reset_ = 0;
};

}  // namespace rb::ring
