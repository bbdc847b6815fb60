// The hang guard's heartbeat across nodes (app/heartbeat.hpp), on 4 ranks in simulated nodes of
// 2 (what --ranks-per-node 2 makes): one rank per node writes the shared file, the lowest live
// one; a stopped writer is replaced by the next rank of its node; each rank reads its node's
// slots from shared memory and the other node's from the file (node-major: the cyclic layout
// puts world ranks 0, 2, 1, 3 in that order); a stopped rank is named, and a node none of whose
// slots moved is said to be quiet. The beats are driven by hand with a clock the test sets, so
// the election does not depend on how fast this machine runs.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <mpi.h>

#include "app/heartbeat.hpp"
#include "app/watchdog.hpp"
#include "runtime/mpi.hpp"
#include "test_support.hpp"

namespace {

using rb::NodeHeartbeat;
using rb::Watchdog;
using Clock = NodeHeartbeat::Clock;

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// Every rank's number of file writes so far, in world order.
std::vector<unsigned long long> all_writes(const NodeHeartbeat& beats) {
  std::vector<unsigned long long> out(static_cast<std::size_t>(rb::test::world()));
  const unsigned long long mine = beats.writes();
  MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, out.data(), 1, MPI_UNSIGNED_LONG_LONG,
                MPI_COMM_WORLD);
  return out;
}

// One beat at time t0 + `second` s on the ranks where `alive`: put, then (after every rank has
// put) publish; collective, so a "stopped" rank still takes part in the barriers.
void beat(NodeHeartbeat& beats, Clock::time_point t0, int second, bool alive, std::size_t point) {
  if (alive) beats.put(Watchdog::slot_text(second, "coll", point, true, false));
  MPI_Barrier(MPI_COMM_WORLD);
  if (alive) beats.publish(t0 + std::chrono::seconds(second));
  MPI_Barrier(MPI_COMM_WORLD);
}

// read() on every rank before any rank beats again (a node's ranks read each other's memory).
std::vector<std::string> read_all(const NodeHeartbeat& beats) {
  std::vector<std::string> slots = beats.read();
  MPI_Barrier(MPI_COMM_WORLD);
  return slots;
}

std::vector<Watchdog::Beat> parsed(const std::vector<std::string>& slots,
                                   const std::vector<bool>& quiet = {}) {
  std::vector<Watchdog::Beat> out;
  for (std::size_t r = 0; r < slots.size(); ++r) {
    out.push_back(Watchdog::parse_slot(slots[r]));
    out.back().node_quiet = r < quiet.size() && quiet[r];
  }
  return out;
}

// The shared file `stem`, empty, as the driver's rank 0 creates it (and its folder, which
// test_path leaves to the caller). Collective.
std::string create_empty(const std::string& stem) {
  const std::string path = rb::test::test_path("driver", stem, ".heartbeat");
  if (rb::test::rank() == 0) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

// The 4 ranks in simulated nodes of 2 (`placement`), each with its NodeHeartbeat on a fresh
// shared file `stem`. Collective.
struct Nodes {
  rb::Comm node;
  rb::RankLayout layout;
  std::string path;
  NodeHeartbeat beats;
  Nodes(rb::Placement placement, const std::string& stem)
      : layout(rb::discover_rank_layout(MPI_COMM_WORLD, rb::SimulatedNodes{2, placement}, &node)),
        path(create_empty(stem)),
        beats(path, MPI_COMM_WORLD, node.get()) {}
  // Every rank done: the window released, the file removed.
  void finish() {
    MPI_Barrier(MPI_COMM_WORLD);
    beats.release();
    if (rb::test::rank() == 0) std::remove(path.c_str());
  }
};

}  // namespace

TEST_CASE("heartbeat: one writer per node, the next takes over, a stopped rank is named") {
  REQUIRE(rb::test::world() == 4);
  const int me = rb::test::rank();
  Nodes nodes(rb::Placement::Block, "heartbeat_nodes");  // nodes {0, 1} and {2, 3}
  NodeHeartbeat& beats = nodes.beats;
  REQUIRE(beats.error() == "");
  CHECK(beats.node() == me / 2);
  const Clock::time_point t0 = Clock::now();

  for (int s = 1; s <= 3; ++s) beat(beats, t0, s, true, 7);
  // Only the nodes' lowest ranks wrote: 2 writes a beat for 4 ranks, not 4 synced ones.
  CHECK(all_writes(beats) == std::vector<unsigned long long>{3, 0, 3, 0});
  for (const Watchdog::Beat& b : parsed(read_all(beats))) {
    CHECK(b.count == 3);
    CHECK(b.where == "sweep coll point 7");
  }

  // Rank 2, node 1's writer, stops: rank 3 writes in its place once rank 2's record has not
  // moved for kWriterStaleS (2.5 s): at seconds 6 and 7, not 4 and 5.
  for (int s = 4; s <= 6; ++s) beat(beats, t0, s, me != 2, 8);
  const std::vector<std::string> before = read_all(beats);
  beat(beats, t0, 7, me != 2, 8);
  const std::vector<std::string> after = read_all(beats);
  CHECK(all_writes(beats) == std::vector<unsigned long long>{7, 0, 3, 2});
  const std::string text = Watchdog::silent_ranks_text(
      me, parsed(before), parsed(after, quiet_node_ranks(beats, before, after)), 3.5);
  CAPTURE(text);
  if (me != 2) {
    CHECK(contains(text,
                   "the rank(s) the others wait for: rank 2 (last at sweep coll point 7) "
                   "sent no heartbeat for 3.5 s: the process is stopped"));
    CHECK_FALSE(contains(text, "rank 3 ("));
    CHECK_FALSE(contains(text, "nor did any other rank of its node"));
  }

  // Node 1 stops altogether: node 0 sees nothing of it move in the file and says so.
  beat(beats, t0, 8, me < 2, 9);
  const std::vector<std::string> before2 = read_all(beats);
  beat(beats, t0, 9, me < 2, 9);
  const std::vector<std::string> after2 = read_all(beats);
  const std::vector<bool> quiet = quiet_node_ranks(beats, before2, after2);
  if (me < 2) {
    CHECK(quiet == std::vector<bool>{false, false, true, true});
    const std::string text2 =
        Watchdog::silent_ranks_text(me, parsed(before2), parsed(after2, quiet), 3.5);
    CAPTURE(text2);
    CHECK(contains(text2,
                   "rank 2 (last at sweep coll point 7), rank 3 (last at sweep coll "
                   "point 8) sent no heartbeat for 3.5 s, nor did any other rank of its "
                   "node through the shared heartbeat file"));
  }
  nodes.finish();
}

TEST_CASE("heartbeat: the file is node-major, each rank's slot read back where it belongs") {
  REQUIRE(rb::test::world() == 4);
  const int me = rb::test::rank();
  Nodes nodes(rb::Placement::Cyclic, "heartbeat_cyclic");  // nodes {0, 2} and {1, 3}
  NodeHeartbeat& beats = nodes.beats;
  beats.put(Watchdog::slot_text(1, "r" + std::to_string(me), 0, true, false));
  MPI_Barrier(MPI_COMM_WORLD);
  beats.publish(Clock::now());
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<Watchdog::Beat> got = parsed(read_all(beats));
  for (int r = 0; r < 4; ++r)
    CHECK(got[std::size_t(r)].where == "sweep r" + std::to_string(r) + " point 0");
  if (me == 0) {  // the file itself: node 0's ranks (0, 2), then node 1's (1, 3)
    std::FILE* f = std::fopen(nodes.path.c_str(), "rb");
    REQUIRE(f != nullptr);
    std::string all(4 * Watchdog::kSlotBytes, '\0');
    CHECK(std::fread(all.data(), 1, all.size(), f) == all.size());
    std::fclose(f);
    const int order[4] = {0, 2, 1, 3};
    for (std::size_t i = 0; i < 4; ++i)
      CHECK(
          Watchdog::parse_slot(all.substr(i * Watchdog::kSlotBytes, Watchdog::kSlotBytes)).where ==
          "sweep r" + std::to_string(order[i]) + " point 0");
  }
  nodes.finish();
}
