#include "runtime/mpi.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <initializer_list>
#include <string>

#include "config/environment.hpp"
#include "runtime/mpi_util.hpp"

namespace rb {

namespace {

bool is_predefined(MPI_Comm c) {
  return c == MPI_COMM_NULL || c == MPI_COMM_WORLD || c == MPI_COMM_SELF;
}

// The value of the first set variable of `names` and which one it was; nullptr when none is set.
const char* first_set(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v != nullptr && *v != '\0') {
      *which = n;
      return v;
    }
  }
  return nullptr;
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME + 1] = {0};
  int len = 0;
  if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS && len > 0) return std::string(name, len);
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) return host;
  return "unknown";
}

// Node n of the simulated layout that rank r belongs to.
int simulated_node_of(int rank, int world, const SimulatedNodes& sim) {
  const int k = sim.ranks_per_node;
  if (sim.placement == Placement::Block) return rank / k;
  const int nodes = (world + k - 1) / k;
  return rank % nodes;
}

}  // namespace

const char* to_string(Placement p) {
  return p == Placement::Cyclic ? "cyclic" : "block";
}

SimulatedNodes simulated_nodes_from_environment() {
  SimulatedNodes sim;
  const char* name = nullptr;
  const char* v = first_set({"RINGBENCH_RANKS_PER_NODE", "RINGBENCH_TEST_RANKS_PER_NODE"}, &name);
  if (v == nullptr) return sim;
  sim.ranks_per_node =
      static_cast<int>(cfg::env_int(name, v, 1, 1 << 20, "ranks per simulated node"));
  const auto placement = cfg::env_value("RINGBENCH_PLACEMENT");
  if (placement &&
      cfg::env_choice("RINGBENCH_PLACEMENT", *placement, {"block", "cyclic"}) == "cyclic")
    sim.placement = Placement::Cyclic;
  return sim;
}

void mpi_check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING + 1] = {0};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "error code %d", rc);
  throw std::runtime_error(std::string("MPI call ") + call + " failed at " + file + ":" +
                           std::to_string(line) + " on rank " +
                           std::to_string(mpi::world_rank_or_minus_one()) + ": " + text);
}

MpiEnvironment::MpiEnvironment(int& argc, char**& argv) {
  int provided = 0;
  const int rc = MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS)
    throw std::runtime_error("MPI_Init_thread(MPI_THREAD_FUNNELED) failed with code " +
                             std::to_string(rc));
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
  return discover_rank_layout(world, simulated_nodes_from_environment(), node_comm_out);
}

RankLayout discover_rank_layout(MPI_Comm world, const SimulatedNodes& simulated,
                                Comm* node_comm_out) {
  RankLayout layout;
  layout.simulated = simulated;
  RB_MPI_CHECK(MPI_Comm_rank(world, &layout.rank));
  RB_MPI_CHECK(MPI_Comm_size(world, &layout.world_size));
  layout.hostname = processor_name();

  MPI_Comm raw_node = MPI_COMM_NULL;
  if (simulated.active()) {
    const int node = simulated_node_of(layout.rank, layout.world_size, simulated);
    RB_MPI_CHECK(MPI_Comm_split(world, node, layout.rank, &raw_node));
  } else {
    RB_MPI_CHECK(
        MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, layout.rank, MPI_INFO_NULL, &raw_node));
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
