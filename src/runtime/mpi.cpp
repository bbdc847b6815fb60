#include "runtime/mpi.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace rb {

namespace {

int world_rank_or_minus_one() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

bool is_predefined(MPI_Comm c) {
  return c == MPI_COMM_NULL || c == MPI_COMM_WORLD || c == MPI_COMM_SELF;
}

// RINGBENCH_TEST_RANKS_PER_NODE=k: 0 when unset; a clear error when set to garbage, because a
// silently ignored override would make a multi-node test pass on the single-node path.
int test_ranks_per_node() {
  const char* v = std::getenv("RINGBENCH_TEST_RANKS_PER_NODE");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long k = std::strtol(v, &end, 10);
  if (*end != '\0' || k <= 0 || k > 1 << 20)
    throw std::runtime_error(std::string("RINGBENCH_TEST_RANKS_PER_NODE must be a positive integer, got '") +
                             v + "'");
  return static_cast<int>(k);
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME + 1] = {0};
  int len = 0;
  if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS && len > 0) return std::string(name, len);
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) return host;
  return "unknown";
}

}  // namespace

void mpi_check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING + 1] = {0};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "error code %d", rc);
  throw std::runtime_error(std::string("MPI call ") + call + " failed at " + file + ":" +
                           std::to_string(line) + " on rank " + std::to_string(world_rank_or_minus_one()) +
                           ": " + text);
}

MpiEnvironment::MpiEnvironment(int& argc, char**& argv) {
  int provided = 0;
  const int rc = MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS)
    throw std::runtime_error("MPI_Init_thread(MPI_THREAD_FUNNELED) failed with code " + std::to_string(rc));
  thread_level_ = provided;
  // MPI_COMM_WORLD keeps MPI's default handler (errors are fatal, and MPI names the call):
  // switching it to MPI_ERRORS_RETURN would let every unchecked call elsewhere fail silently.
  // RB_MPI_CHECK reports the codes that do come back (communicators set to MPI_ERRORS_RETURN,
  // and errors MPI returns before invoking a handler).
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

const char* MpiEnvironment::thread_level_name(int level) {
  if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
  if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  return "unknown";
}

Comm::~Comm() {
  if (is_predefined(comm_)) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);  // no throw from a destructor: a failed free only leaks
}

Comm& Comm::operator=(Comm&& o) noexcept {
  if (this != &o) {
    Comm dying(comm_);  // frees the old communicator
    comm_ = o.comm_;
    o.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

int Comm::rank() const {
  int r = 0;
  RB_MPI_CHECK(MPI_Comm_rank(comm_, &r));
  return r;
}

int Comm::size() const {
  int s = 0;
  RB_MPI_CHECK(MPI_Comm_size(comm_, &s));
  return s;
}

RankLayout discover_rank_layout(MPI_Comm world, Comm* node_comm_out) {
  RankLayout layout;
  RB_MPI_CHECK(MPI_Comm_rank(world, &layout.rank));
  RB_MPI_CHECK(MPI_Comm_size(world, &layout.world_size));
  layout.hostname = processor_name();

  MPI_Comm raw_node = MPI_COMM_NULL;
  const int k = test_ranks_per_node();
  if (k > 0) {
    RB_MPI_CHECK(MPI_Comm_split(world, layout.rank / k, layout.rank, &raw_node));
  } else {
    RB_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, layout.rank, MPI_INFO_NULL, &raw_node));
  }
  Comm node(raw_node);
  layout.local_rank = node.rank();
  layout.local_size = node.size();

  // Node leaders (local rank 0, which is the lowest world rank on the node because the split
  // keys on world rank) rank themselves in world order; that order is the node index.
  MPI_Comm raw_leaders = MPI_COMM_NULL;
  const int color = layout.local_rank == 0 ? 0 : MPI_UNDEFINED;
  RB_MPI_CHECK(MPI_Comm_split(world, color, layout.rank, &raw_leaders));
  Comm leaders(raw_leaders);
  int index_and_count[2] = {0, 0};
  if (leaders.valid()) {
    index_and_count[0] = leaders.rank();
    index_and_count[1] = leaders.size();
  }
  RB_MPI_CHECK(MPI_Bcast(index_and_count, 2, MPI_INT, 0, node.get()));
  layout.node_index = index_and_count[0];
  layout.node_count = index_and_count[1];

  if (node_comm_out != nullptr) *node_comm_out = std::move(node);
  return layout;
}

}  // namespace rb
