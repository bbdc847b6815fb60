#pragma once
// Rank groups of the profiling sweeps. A group kind splits the world into groups that run
// the same operation at the same time (nccl-tests' split mode):
//   world       one group of every rank
//   intra_node  one group per node: the ranks sharing a node
//   inter_node  one group per local rank: one rank per node, all with the same local rank
//   <k>         consecutive blocks of k ranks (k must divide the world size)
// Node membership comes from RankLayout (--ranks-per-node / RINGBENCH_RANKS_PER_NODE simulate
// nodes).
#include <string>
#include <vector>

#include <mpi.h>

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

// This rank's group: a communicator over its members (collective over `world`).
struct Group {
  Spec spec;
  int id = 0;    // the color; groups of one kind have distinct ids
  int rank = 0;  // rank in the group
  int size = 1;
  Comm comm;  // owned split of world
  MPI_Comm get() const { return comm.get(); }
};
Group make_group(const Spec& spec, MPI_Comm world, const RankLayout& layout);

}  // namespace rb::groups
