#include "ring/cp_attention.hpp"

#include <stdexcept>
#include <utility>

#include "names.hpp"

namespace rb::ring {
namespace {

const std::pair<Scheme, const char*> kSchemes[] = {{Scheme::Ring, "ring"},
                                                   {Scheme::AllGather, "allgather"},
                                                   {Scheme::Ulysses, "ulysses"},
                                                   {Scheme::Hybrid, "hybrid"}};

// What one rank sends in the all-to-alls of a head split over `members` ranks (forward: Q, K,
// V out and O, LSE back; backward: dO out, dQ, dK, dV back): (members - 1) / members of each.
// Everything crosses in the input dtype but LSE (fp32): ring/head_exchange.hpp.
std::uint64_t head_exchange_bytes(const Problem& p, std::uint64_t members, bool backward) {
  const std::uint64_t elems = static_cast<std::uint64_t>(p.shard_elements());
  const std::uint64_t kv_elems = static_cast<std::uint64_t>(p.kv_shard_elements());
  const std::uint64_t w = attn::dtype_size(p.dtype), f32 = sizeof(float);
  const std::uint64_t rows =
      static_cast<std::uint64_t>(p.batch) * p.heads * static_cast<std::uint64_t>(p.local_rows());
  const std::uint64_t fwd = (elems + 2 * kv_elems) * w + elems * w + rows * f32;
  const std::uint64_t bwd = elems * w + (elems + 2 * kv_elems) * w;
  return (fwd + (backward ? bwd : 0)) * (members - 1) / members;
}

}  // namespace

const char* to_string(Scheme s) {
  return name_of(kSchemes, s);
}

Scheme scheme_from_string(const std::string& s) {
  return value_of(kSchemes, s, "scheme");
}

std::vector<std::string> scheme_names() {
  return names_of(kSchemes);
}

std::uint64_t bytes_sent_per_iteration(const Problem& p, Scheme s, bool backward,
                                       int ulysses_degree) {
  const std::uint64_t R = static_cast<std::uint64_t>(p.ring_size);
  const std::uint64_t kv_elems = static_cast<std::uint64_t>(p.kv_shard_elements());  // GQA: fewer
  const std::uint64_t w = attn::dtype_size(p.dtype), f32 = sizeof(float);
  if (R == 1) return 0;
  switch (s) {
    case Scheme::Ring:  // forward: R-1 hops of K|V; backward: R-2 of K|V, R-1 of dK|dV (own block
                        // last)
      return 2 * kv_elems * w * (R - 1) +
             (backward ? 2 * kv_elems * (w * (R - 2) + f32 * (R - 1)) : 0);
    case Scheme::AllGather:
      return 2 * kv_elems * w * (R - 1) + (backward ? 2 * kv_elems * f32 * (R - 1) : 0);
    case Scheme::Ulysses:
      return head_exchange_bytes(p, R, backward);
    case Scheme::Hybrid: {  // the all-to-alls inside the subgroup, then the inner ring
      Problem inner = p;
      inner.heads = p.heads / ulysses_degree;
      inner.kv_heads = p.num_kv_heads() / ulysses_degree;
      inner.ring_size = p.ring_size / ulysses_degree;
      return head_exchange_bytes(p, static_cast<std::uint64_t>(ulysses_degree), backward) +
             bytes_sent_per_iteration(inner, Scheme::Ring, backward);
    }
  }
  return 0;
}

}  // namespace rb::ring
