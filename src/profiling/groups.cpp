#include "profiling/groups.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <utility>

#include "names.hpp"
#include "runtime/mpi_util.hpp"

namespace rb::groups {

namespace {

// The group kinds named by a word; the others are a block size.
const std::pair<Kind, const char*> kNamedKinds[] = {
    {Kind::World, "world"}, {Kind::IntraNode, "intra_node"}, {Kind::InterNode, "inter_node"}};

}  // namespace

std::string Spec::label() const {
  if (kind == Kind::Blocks) return std::to_string(block);
  return name_of(kNamedKinds, kind, "world");
}

std::string parse_spec(const std::string& text, Spec* out) {
  Spec s;
  if (const auto named = find_value(kNamedKinds, text)) {
    s.kind = *named;
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
  g.comms = std::make_shared<GroupComms>();
  g.comms->mpi = Comm(split);
  RB_MPI_CHECK(MPI_Comm_rank(split, &g.rank));
  RB_MPI_CHECK(MPI_Comm_size(split, &g.size));
  return g;
}

namespace {

// The world ranks of this rank's group, ordered as MPI_Comm_split orders them (key, then world
// rank). Collective over `world`.
std::vector<int> members_of(const Assignment& a, MPI_Comm world) {
  const int n = mpi::size_of(world);
  const int mine[2] = {a.color, a.key};
  std::vector<int> all(2 * static_cast<std::size_t>(n));
  RB_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, world));
  std::vector<std::pair<int, int>> keyed;  // (key, world rank)
  for (int r = 0; r < n; ++r)
    if (all[2 * static_cast<std::size_t>(r)] == a.color)
      keyed.emplace_back(all[2 * static_cast<std::size_t>(r) + 1], r);
  std::sort(keyed.begin(), keyed.end());
  std::vector<int> members;
  for (const auto& k : keyed) members.push_back(k.second);
  return members;
}

// A communicator over `members` (in that order), collective over them alone.
Comm create_over(const std::vector<int>& members, MPI_Comm world) {
  MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  RB_MPI_CHECK(MPI_Comm_group(world, &world_group));
  RB_MPI_CHECK(
      MPI_Group_incl(world_group, static_cast<int>(members.size()), members.data(), &group));
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_create_group(world, group, 0, &comm);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  RB_MPI_CHECK(rc);
  return Comm(comm);
}

}  // namespace

Group GroupCache::group(const Spec& spec, MPI_Comm world, const RankLayout& layout) {
  const Assignment a = assign(spec, layout);
  const std::vector<int> members = members_of(a, world);
  auto it = cache_.find(members);
  if (it == cache_.end()) {
    auto comms = std::make_shared<GroupComms>();
    comms->members = members;
    comms->mpi = create_over(members, world);
    it = cache_.emplace(members, std::move(comms)).first;
    ++created_;
  }
  Group g;
  g.spec = spec;
  g.id = a.color;
  g.comms = it->second;
  g.rank = g.comms->mpi.rank();
  g.size = g.comms->mpi.size();
  return g;
}

}  // namespace rb::groups
