#include "ring/cp_attention.hpp"

#include <stdexcept>
#include <utility>

namespace rb::ring {
namespace {

const std::pair<Scheme, const char*> kSchemes[] = {
    {Scheme::Ring, "ring"}, {Scheme::AllGather, "allgather"}, {Scheme::Ulysses, "ulysses"}};

}  // namespace

const char* to_string(Scheme s) {
  for (const auto& [value, name] : kSchemes)
    if (value == s) return name;
  return "?";
}

Scheme scheme_from_string(const std::string& s) {
  std::string known;
  for (const auto& [value, name] : kSchemes) {
    if (s == name) return value;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  throw std::invalid_argument("unknown scheme '" + s + "' (" + known + ")");
}

std::vector<std::string> scheme_names() {
  std::vector<std::string> out;
  for (const auto& [value, name] : kSchemes) out.push_back(name);
  return out;
}

std::uint64_t bytes_sent_per_iteration(const Problem& p, Scheme s, bool backward) {
  const std::uint64_t R = static_cast<std::uint64_t>(p.ring_size);
  const std::uint64_t shard = static_cast<std::uint64_t>(p.shard_elements()) * attn::dtype_size(p.dtype);
  const std::uint64_t shard_f32 = static_cast<std::uint64_t>(p.shard_elements()) * sizeof(float);
  const std::uint64_t rows = static_cast<std::uint64_t>(p.batch) * p.heads * static_cast<std::uint64_t>(p.local_rows());
  if (R == 1) return 0;
  switch (s) {
    case Scheme::Ring:  // forward: R-1 hops of K|V; backward: K|V again with dK|dV, and one hop home
      return 2 * shard * (R - 1) + (backward ? 2 * shard * (R - 1) + 2 * shard_f32 * R : 0);
    case Scheme::AllGather:
      return 2 * shard * (R - 1) + (backward ? 2 * shard_f32 * (R - 1) : 0);
    case Scheme::Ulysses: {  // each all-to-all sends (R-1)/R of its buffer
      const std::uint64_t fwd = 3 * shard + shard_f32 + rows * sizeof(float);
      const std::uint64_t bwd = shard + 3 * shard_f32;
      return (fwd + (backward ? bwd : 0)) * (R - 1) / R;
    }
  }
  return 0;
}

}  // namespace rb::ring
