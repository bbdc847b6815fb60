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

struct RankLayout {
  int rank = 0;
  int world_size = 1;
  int node_index = 0;   // 0..node_count-1, ordered by the lowest world rank on each node
  int node_count = 1;
  int local_rank = 0;   // rank within the node
  int local_size = 1;
  std::string hostname;
};

// Collective over `world`. The node communicator comes from MPI_Comm_split_type(SHARED);
// for tests, RINGBENCH_TEST_RANKS_PER_NODE=k pretends every k consecutive ranks form a node.
RankLayout discover_rank_layout(MPI_Comm world, Comm* node_comm_out = nullptr);

// Throws std::runtime_error with the MPI error string and the call that failed.
void mpi_check(int rc, const char* call, const char* file, int line);
#define RB_MPI_CHECK(call) ::rb::mpi_check((call), #call, __FILE__, __LINE__)

}  // namespace rb
