// The collectives sweep's keys and their parsing into CollParams (collectives_params.hpp).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "config/bytes.hpp"
#include "dtype_names.hpp"
#include "profiling/engine.hpp"
#include "profiling/timing.hpp"
#include "sweeps/collectives.hpp"
#include "sweeps/collectives_params.hpp"

namespace rb {

const std::vector<cfg::KeySpec>& collectives_keys() {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> keys = cfg::sweep_keys(
      "collectives",
      {choice("operations", "[" + cfg::join(coll::op_names(), ", ") + "]", coll::op_names(),
              "operations to time, in this order; sendrecv is the ring neighbour exchange")
           .or_list(),
       bytes("min_bytes", "8", 1, "smallest message size"),
       bytes("max_bytes", "1MiB", 1, "largest message size (>= min_bytes)").on_cuda("64MiB"),
       integer("factor", "2", 2, 1 << 20, "sizes are min_bytes * factor^k up to max_bytes"),
       dtype("dtypes", "[fp32]", {"fp32", "fp64", "fp16", "bf16", "int32"},
             "element types; reductions are sums")
           .or_list(),
       choice("in_place", "[false, true]", {"false", "true"}, "out-of-place and/or in-place points")
           .or_list(),
       other("groups", "group or list", "[world]",
             "world|intra_node|inter_node|a group size dividing the world size",
             "rank groups; each runs the operations concurrently"),
       integer("warmup", "5", 0, 1000000, "untimed calls before each point"),
       integer("iterations", "20", 1, 1000000, "timed calls per point (and per-iteration loop)"),
       flag("check", "true", "verify the received data of one extra call after timing"),
       integer("root", "0", 0, INT64_MAX, "root of broadcast and reduce")
           .limited("0 .. world size - 1")});
  return keys;
}

namespace coll_sweep {
namespace {

std::vector<groups::Spec> parse_groups(const cfg::Node& n, int world_size) {
  if (!n.has("groups")) return {groups::Spec{}};
  std::vector<groups::Spec> out;
  const cfg::Node g = n.child("groups");
  auto one = [&](const cfg::Node& e) {
    if (!e.yaml().IsScalar()) e.fail("", "expected world, intra_node, inter_node or a group size");
    groups::Spec spec;
    std::string err = groups::parse_spec(e.yaml().Scalar(), &spec);
    if (err.empty()) err = groups::validate(spec, world_size);
    if (!err.empty()) e.fail("", err);
    out.push_back(spec);
  };
  if (g.yaml().IsSequence()) {
    if (g.size() == 0) g.fail("", "expected a non-empty list of groups");
    for (std::size_t i = 0; i < g.size(); ++i) one(g.element(i));
  } else {
    one(g);
  }
  return out;
}

// MPI counts are ints: the host path's largest message in its smallest element must fit one.
void check_host_counts(const cfg::Node& n, const CollParams& p) {
  std::size_t min_elem = 8;
  for (auto t : p.dtypes) min_elem = std::min(min_elem, prof::dtype_size(t));
  if (p.max_bytes / min_elem > static_cast<std::uint64_t>(INT_MAX))
    n.fail("max_bytes", "max_bytes " + std::to_string(p.max_bytes) +
                            " is too large for MPI's int counts on the host path (at most " +
                            std::to_string(static_cast<std::uint64_t>(INT_MAX) * min_elem) +
                            " bytes for these dtypes)");
}

}  // namespace

CollParams parse(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::KeyReader r(spec.node, collectives_keys(), ctx.backend);
  const cfg::Node& n = spec.node;
  CollParams p;
  for (const auto& s : r.choices("operations")) p.ops.push_back(coll::op_from_name(s));
  p.host = ctx.backend == Backend::Host;
  const std::uint64_t min_bytes = r.bytes("min_bytes");
  const std::uint64_t max_bytes = r.bytes("max_bytes");
  if (min_bytes > max_bytes)
    n.fail(n.has("min_bytes") ? "min_bytes" : "max_bytes",
           "min_bytes (" + std::to_string(min_bytes) + ") is larger than max_bytes (" +
               std::to_string(max_bytes) + ")");
  const std::int64_t factor = r.integer("factor");
  for (std::uint64_t s = min_bytes; s <= max_bytes; s *= static_cast<std::uint64_t>(factor)) {
    p.sizes.push_back(s);
    if (s > max_bytes / static_cast<std::uint64_t>(factor)) break;
  }
  p.max_bytes = p.sizes.back();
  // The collectives' tables (src/profiling) know the types by their long names.
  for (const auto& s : r.dtypes("dtypes"))
    p.dtypes.push_back(prof::dtype_from_name(std::string(long_dtype_name(s))));
  for (const auto& s : r.choices("in_place")) p.in_place.push_back(s == "true");
  p.groups = parse_groups(n, ctx.world_size);
  p.warmup = r.integer("warmup");
  p.iterations = r.integer("iterations");
  p.check = r.flag("check");
  p.root = static_cast<int>(r.integer_below("root", ctx.world_size));
  if (p.host) check_host_counts(n, p);
  return p;
}

}  // namespace coll_sweep

}  // namespace rb
