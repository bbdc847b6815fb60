// Rank layout under MPI: every rank's view is gathered and checked for consistency, and, when
// RINGBENCH_RANKS_PER_NODE=k (RINGBENCH_PLACEMENT) is set, against the layout the simulation
// predicts; block and cyclic simulations are also checked directly at every world size.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"
#include "test_support.hpp"

using namespace rb;

namespace {

// The layout `sim` predicts for this rank: block puts ranks 0..k-1 on node 0; cyclic puts
// rank r on node r % N with N = ceil(world / k).
void check_simulated(const RankLayout& me, const SimulatedNodes& sim) {
  const int k = sim.ranks_per_node, size = me.world_size, rank = me.rank;
  const int nodes = (size + k - 1) / k;
  CHECK(me.node_count == nodes);
  if (sim.placement == Placement::Block) {
    CHECK(me.node_index == rank / k);
    CHECK(me.local_rank == rank % k);
    CHECK(me.local_size == std::min(k, size - (rank / k) * k));
  } else {
    const int node = rank % nodes;
    CHECK(me.node_index == node);
    CHECK(me.local_rank == rank / nodes);
    CHECK(me.local_size == (size - node + nodes - 1) / nodes);  // ranks node, node+N, ... < size
  }
}

}  // namespace

TEST_CASE("rank layout is consistent across ranks") {
  Comm node;
  const RankLayout me = discover_rank_layout(MPI_COMM_WORLD, &node);
  const int rank = test::rank(), size = test::world();
  CHECK(me.rank == rank);
  CHECK(me.world_size == size);
  CHECK(!me.hostname.empty());
  REQUIRE(node.valid());
  CHECK(node.rank() == me.local_rank);
  CHECK(node.size() == me.local_size);
  CHECK(me.local_rank >= 0);
  CHECK(me.local_rank < me.local_size);
  CHECK(me.node_index >= 0);
  CHECK(me.node_index < me.node_count);

  // Everyone on my node agrees on the node index and count.
  int mine[2] = {me.node_index, me.node_count}, lo[2] = {0, 0}, hi[2] = {0, 0};
  MPI_Allreduce(mine, lo, 2, MPI_INT, MPI_MIN, node.get());
  MPI_Allreduce(mine, hi, 2, MPI_INT, MPI_MAX, node.get());
  CHECK(lo[0] == hi[0]);
  CHECK(lo[1] == hi[1]);

  // Gather every rank's (node_index, node_count, local_rank, local_size) and check the whole.
  const int row[4] = {me.node_index, me.node_count, me.local_rank, me.local_size};
  std::vector<int> all(static_cast<std::size_t>(4 * size));
  MPI_Allgather(row, 4, MPI_INT, all.data(), 4, MPI_INT, MPI_COMM_WORLD);
  std::map<int, std::set<int>> local_ranks_by_node;
  std::map<int, int> size_by_node, lowest_rank_by_node;
  for (int r = 0; r < size; ++r) {
    const int* x = &all[static_cast<std::size_t>(4 * r)];
    CAPTURE(r);
    CHECK(x[1] == me.node_count);
    CHECK(local_ranks_by_node[x[0]].insert(x[2]).second);  // local ranks unique per node
    if (size_by_node.count(x[0])) CHECK(size_by_node[x[0]] == x[3]);
    size_by_node[x[0]] = x[3];
    if (!lowest_rank_by_node.count(x[0])) lowest_rank_by_node[x[0]] = r;
  }
  CHECK(static_cast<int>(local_ranks_by_node.size()) == me.node_count);
  for (const auto& kv : local_ranks_by_node) {
    CHECK(static_cast<int>(kv.second.size()) == size_by_node[kv.first]);
    CHECK(*kv.second.begin() == 0);
    CHECK(*kv.second.rbegin() == size_by_node[kv.first] - 1);
  }
  // Node indices follow the lowest world rank on each node.
  int previous_lowest = -1;
  for (int n = 0; n < me.node_count; ++n) {
    REQUIRE(lowest_rank_by_node.count(n));
    CHECK(lowest_rank_by_node[n] > previous_lowest);
    previous_lowest = lowest_rank_by_node[n];
  }

  const SimulatedNodes sim = simulated_nodes_from_environment();
  if (sim.active()) {
    check_simulated(me, sim);
  } else {
    // One machine under mpirun: all ranks share memory, so one node.
    CHECK(me.node_count == 1);
    CHECK(me.local_rank == rank);
    CHECK(me.local_size == size);
  }
}

TEST_CASE("simulated nodes: block and cyclic placement at every world size") {
  for (int k : {1, 2, 3}) {
    for (Placement p : {Placement::Block, Placement::Cyclic}) {
      CAPTURE(k);
      CAPTURE(to_string(p));
      const SimulatedNodes sim{k, p};
      Comm node;
      const RankLayout me = discover_rank_layout(MPI_COMM_WORLD, sim, &node);
      check_simulated(me, sim);
      CHECK(node.size() == me.local_size);
      CHECK(me.simulated.ranks_per_node == k);
    }
  }
}

TEST_CASE("simulated nodes from the environment: new names, old alias, clear errors") {
  struct Saved {
    std::string name;
    bool had;
    std::string value;
  };
  std::vector<Saved> saved;
  for (const char* n :
       {"RINGBENCH_RANKS_PER_NODE", "RINGBENCH_TEST_RANKS_PER_NODE", "RINGBENCH_PLACEMENT"}) {
    const char* v = std::getenv(n);
    saved.push_back({n, v != nullptr, v ? v : ""});
    unsetenv(n);
  }
  CHECK(!simulated_nodes_from_environment().active());
  setenv("RINGBENCH_TEST_RANKS_PER_NODE", "3", 1);
  CHECK(simulated_nodes_from_environment().ranks_per_node == 3);
  setenv("RINGBENCH_RANKS_PER_NODE", "2", 1);  // the new name wins over the alias
  setenv("RINGBENCH_PLACEMENT", "cyclic", 1);
  SimulatedNodes sim = simulated_nodes_from_environment();
  CHECK(sim.ranks_per_node == 2);
  CHECK(sim.placement == Placement::Cyclic);
  setenv("RINGBENCH_PLACEMENT", "round-robin", 1);
  CHECK_THROWS_WITH_AS(simulated_nodes_from_environment(),
                       doctest::Contains("environment variable RINGBENCH_PLACEMENT: expected one "
                                         "of block|cyclic, got 'round-robin'"),
                       std::runtime_error);
  unsetenv("RINGBENCH_PLACEMENT");
  setenv("RINGBENCH_RANKS_PER_NODE", "two", 1);
  CHECK_THROWS_WITH_AS(
      simulated_nodes_from_environment(),
      doctest::Contains("environment variable RINGBENCH_RANKS_PER_NODE: expected an integer "
                        "between 1 and 1048576 (ranks per simulated node), got 'two'"),
      std::runtime_error);
  for (const auto& s : saved) {
    if (s.had)
      setenv(s.name.c_str(), s.value.c_str(), 1);
    else
      unsetenv(s.name.c_str());
  }
}

TEST_CASE("layout without a node communicator out-parameter matches") {
  Comm node;
  const RankLayout a = discover_rank_layout(MPI_COMM_WORLD, &node);
  const RankLayout b = discover_rank_layout(MPI_COMM_WORLD);
  CHECK(a.node_index == b.node_index);
  CHECK(a.node_count == b.node_count);
  CHECK(a.local_rank == b.local_rank);
  CHECK(a.local_size == b.local_size);
}

TEST_CASE("Comm ownership: moves hand the communicator over, predefined ones are never freed") {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  Comm a(dup);
  Comm b(std::move(a));
  CHECK(!a.valid());
  CHECK(b.valid());
  CHECK(b.get() == dup);
  Comm c;
  c = std::move(b);
  CHECK(c.get() == dup);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(c.size() == size);
  { Comm world(MPI_COMM_WORLD); }  // destructor must leave WORLD alone
  int rank = -1;
  CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS);
}

TEST_CASE("mpi_check names the call, the place, the rank and MPI's reason") {
  CHECK_NOTHROW(mpi_check(MPI_SUCCESS, "MPI_Barrier(world)", "x.cpp", 1));
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    mpi_check(MPI_ERR_COMM, "MPI_Barrier(world)", "x.cpp", 42);
    FAIL("mpi_check did not throw");
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    char text[MPI_MAX_ERROR_STRING] = {0};
    int len = 0;
    MPI_Error_string(MPI_ERR_COMM, text, &len);
    CHECK(msg == "MPI call MPI_Barrier(world) failed at x.cpp:42 on rank " + std::to_string(rank) +
                     ": " + text);
  }
  // A real failing call through the macro, with errors returned instead of aborting.
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int bad = 0;
  CHECK_THROWS_WITH_AS(RB_MPI_CHECK(MPI_Bcast(&bad, 1, MPI_INT, -5, dup)),
                       doctest::Contains("MPI call MPI_Bcast(&bad, 1, MPI_INT, -5, dup) failed at"),
                       std::runtime_error);
  MPI_Comm_free(&dup);
}

TEST_CASE("thread level names") {
  CHECK(std::string(MpiEnvironment::thread_level_name(MPI_THREAD_FUNNELED)) ==
        "MPI_THREAD_FUNNELED");
  CHECK(std::string(MpiEnvironment::thread_level_name(MPI_THREAD_MULTIPLE)) ==
        "MPI_THREAD_MULTIPLE");
  CHECK(std::string(MpiEnvironment::thread_level_name(MPI_THREAD_SINGLE)) == "MPI_THREAD_SINGLE");
  CHECK(std::string(MpiEnvironment::thread_level_name(-12345)) == "unknown");
}

TEST_CASE("MPI helpers: broadcast, agreement, first failing rank, gather") {
  const int rank = test::rank(), size = test::world();
  std::string s = rank == 0 ? "from rank 0" : "other";
  mpi::broadcast_string(s, MPI_COMM_WORLD);
  CHECK(s == "from rank 0");
  CHECK(!mpi::any_rank(false, MPI_COMM_WORLD));
  CHECK(mpi::any_rank(rank == size - 1, MPI_COMM_WORLD));
  CHECK(mpi::first_rank_with(false, MPI_COMM_WORLD) == size);
  CHECK(mpi::first_rank_with(rank >= size / 2, MPI_COMM_WORLD) == size / 2);
  const auto all =
      mpi::gather_strings(std::string(static_cast<std::size_t>(rank), 'x'), MPI_COMM_WORLD);
  REQUIRE(static_cast<int>(all.size()) == size);
  for (int r = 0; r < size; ++r) CHECK(all[r] == std::string(static_cast<std::size_t>(r), 'x'));
  CHECK(mpi::world_rank_or_minus_one() == rank);
}
