#include "profiling/groups.hpp"

#include <cctype>
#include <cstdlib>

namespace rb::groups {

std::string Spec::label() const {
  switch (kind) {
    case Kind::World:
      return "world";
    case Kind::IntraNode:
      return "intra_node";
    case Kind::InterNode:
      return "inter_node";
    case Kind::Blocks:
      return std::to_string(block);
  }
  return "world";
}

std::string parse_spec(const std::string& text, Spec* out) {
  Spec s;
  if (text == "world") {
    s.kind = Kind::World;
  } else if (text == "intra_node") {
    s.kind = Kind::IntraNode;
  } else if (text == "inter_node") {
    s.kind = Kind::InterNode;
  } else {
    bool digits = !text.empty() && text.size() < 10;
    for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (!digits)
      return "unknown group '" + text +
             "': expected world, intra_node, inter_node or a group size (a positive integer)";
    s.kind = Kind::Blocks;
    s.block = std::atoi(text.c_str());
    if (s.block < 1) return "group size must be at least 1, got " + text;
  }
  *out = s;
  return {};
}

std::string validate(const Spec& spec, int world_size) {
  if (spec.kind != Kind::Blocks) return {};
  if (spec.block > world_size)
    return "group size " + std::to_string(spec.block) + " is larger than the " +
           std::to_string(world_size) + " ranks of this run";
  if (world_size % spec.block != 0)
    return "group size " + std::to_string(spec.block) + " does not divide the " +
           std::to_string(world_size) + " ranks of this run";
  return {};
}

Assignment assign(const Spec& spec, const RankLayout& layout) {
  switch (spec.kind) {
    case Kind::World:
      return {0, layout.rank};
    case Kind::IntraNode:
      return {layout.node_index, layout.local_rank};
    case Kind::InterNode:
      return {layout.local_rank, layout.node_index};
    case Kind::Blocks:
      return {layout.rank / spec.block, layout.rank % spec.block};
  }
  return {0, layout.rank};
}

Group make_group(const Spec& spec, MPI_Comm world, const RankLayout& layout) {
  const Assignment a = assign(spec, layout);
  MPI_Comm split = MPI_COMM_NULL;
  RB_MPI_CHECK(MPI_Comm_split(world, a.color, a.key, &split));
  Group g;
  g.spec = spec;
  g.id = a.color;
  g.comm = Comm(split);
  RB_MPI_CHECK(MPI_Comm_rank(split, &g.rank));
  RB_MPI_CHECK(MPI_Comm_size(split, &g.size));
  return g;
}

}  // namespace rb::groups
