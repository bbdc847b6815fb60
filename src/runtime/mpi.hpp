#pragma once
// MPI lifetime, communicator ownership and the rank layout (node index, local rank)
// derived from MPI_Comm_split_type rather than launcher variables.
#include <string>

#include <mpi.h>

namespace rb {

// Owns MPI_Init_thread/MPI_Finalize. Requests MPI_THREAD_FUNNELED and records what was granted.
class MpiEnvironment {
 public:
  MpiEnvironment(int& argc, char**& argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  int thread_level() const { return thread_level_; }
  static const char* thread_level_name(int level);

 private:
  int thread_level_ = 0;
};

// Owns a communicator created by split/dup; never frees MPI_COMM_WORLD/SELF/NULL.
class Comm {
 public:
  Comm() = default;
  explicit Comm(MPI_Comm c) : comm_(c) {}
  ~Comm();
  Comm(Comm&& o) noexcept : comm_(o.comm_) { o.comm_ = MPI_COMM_NULL; }
  Comm& operator=(Comm&& o) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  MPI_Comm get() const { return comm_; }
  int rank() const;
  int size() const;
  bool valid() const { return comm_ != MPI_COMM_NULL; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// A pretend node layout on one machine (tests, dry-runs of a multi-node plan): every
// `ranks_per_node` ranks form a node. Block: ranks 0..K-1 on node 0, K..2K-1 on node 1, ...
// Cyclic: rank r on node r % N, N = ceil(world / K). ranks_per_node 0: the real layout.
enum class Placement { Block, Cyclic };
const char* to_string(Placement p);

struct SimulatedNodes {
  int ranks_per_node = 0;
  Placement placement = Placement::Block;
  bool active() const { return ranks_per_node > 0; }
};

// From RINGBENCH_RANKS_PER_NODE and RINGBENCH_PLACEMENT (block|cyclic; default block), for test
// binaries that call the library directly; RINGBENCH_TEST_RANKS_PER_NODE is the old name of the
// first, still accepted. Throws cfg::ConfigError naming the variable on a malformed value:
// a silently ignored override would make a multi-node test pass on the single-node path.
SimulatedNodes simulated_nodes_from_environment();

struct RankLayout {
  int rank = 0;
  int world_size = 1;
  int node_index = 0;  // 0..node_count-1, ordered by the lowest world rank on each node
  int node_count = 1;
  int local_rank = 0;  // rank within the node
  int local_size = 1;
  std::string hostname;
  SimulatedNodes simulated;  // what produced node_index/local_rank when active()
};

// Collective over `world`. The node communicator comes from MPI_Comm_split_type(SHARED), or
// from `simulated` when active. The first form takes the simulation from the environment.
RankLayout discover_rank_layout(MPI_Comm world, Comm* node_comm_out = nullptr);
RankLayout discover_rank_layout(MPI_Comm world, const SimulatedNodes& simulated,
                                Comm* node_comm_out = nullptr);

// Throws std::runtime_error with the MPI error string and the call that failed.
void mpi_check(int rc, const char* call, const char* file, int line);
#define RB_MPI_CHECK(call) ::rb::mpi_check((call), #call, __FILE__, __LINE__)

}  // namespace rb
