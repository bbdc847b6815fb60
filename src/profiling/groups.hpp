#pragma once
// Rank groups of the profiling sweeps. A group kind splits the world into groups that run
// the same operation at the same time (nccl-tests' split mode):
//   world       one group of every rank
//   intra_node  one group per node: the ranks sharing a node
//   inter_node  one group per local rank: one rank per node, all with the same local rank
//   <k>         consecutive blocks of k ranks (k must divide the world size)
// Node membership comes from RankLayout (--ranks-per-node / RINGBENCH_RANKS_PER_NODE simulate
// nodes).
//
// A group's communicators are made once per run: GroupCache hands every sweep that asks for the
// same members (in the same order) the same MPI communicator, and the NCCL engine keeps the
// group's NCCL communicator beside it (GroupComms), so a second collectives sweep, or a second
// spec naming the same members (`intra_node` and a block of the node's size), builds nothing.
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "runtime/gpu.hpp"
#include "runtime/mpi.hpp"

namespace rb::groups {

enum class Kind { World, IntraNode, InterNode, Blocks };

struct Spec {
  Kind kind = Kind::World;
  int block = 0;  // ranks per group for Kind::Blocks
  // "world", "intra_node", "inter_node", or the block size as text ("4")
  std::string label() const;
};

// Parses one entry of a `groups:` list: a kind name or a positive integer. Returns an error
// text instead of throwing so the caller can attach the config location; empty on success.
std::string parse_spec(const std::string& text, Spec* out);
// Why `spec` is impossible at this world size (empty when fine): a block size that does not
// divide the world, or is larger than it.
std::string validate(const Spec& spec, int world_size);

// Which group this rank joins and its position in it (MPI_Comm_split's color and key).
struct Assignment {
  int color = 0;  // group id: 0 for world, node index for intra_node, local rank for inter_node
  int key = 0;
};
Assignment assign(const Spec& spec, const RankLayout& layout);

// A group's communicators, shared by every sweep of the run that asks for its members.
struct GroupComms {
  std::vector<int> members;  // world ranks, in group rank order
  Comm mpi;                  // over the members
  NcclComm nccl;             // made by the NCCL engine on first use; empty on the host path
};

// This rank's group: a communicator over its members.
struct Group {
  Spec spec;
  int id = 0;    // the color; groups of one kind have distinct ids
  int rank = 0;  // rank in the group
  int size = 1;
  std::shared_ptr<GroupComms> comms;
  MPI_Comm get() const { return comms->mpi.get(); }
};
// A group of its own (MPI_Comm_split, collective over `world`), shared with nothing.
Group make_group(const Spec& spec, MPI_Comm world, const RankLayout& layout);

// The run's groups, keyed by their member list. group() is collective over `world` (every
// rank asks for the same specs in the same order: an MPI_Allgather of each rank's color and
// key); a group not made before is made by MPI_Comm_create_group, collective over its members
// only, who all have it or all lack it (each of them was in every earlier call that made it).
class GroupCache {
 public:
  Group group(const Spec& spec, MPI_Comm world, const RankLayout& layout);
  std::size_t created() const { return created_; }  // communicators this rank made (tests)

 private:
  std::map<std::vector<int>, std::shared_ptr<GroupComms>> cache_;
  std::size_t created_ = 0;
};

}  // namespace rb::groups
