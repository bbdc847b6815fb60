#pragma once
// The hang guard's heartbeat (app/watchdog.hpp says what it is for), built to scale: one write
// a second per node into the shared file, not one synced write per rank.
//
// Each rank puts its 64-byte slot (Watchdog::slot_text) into a record of an MPI shared-memory
// window over its node's ranks (MPI_Win_allocate_shared on the node communicator, simulated
// nodes included): a memory store, no file system, read by the node's other ranks directly.
// One rank per node, its writer, copies the node's records into the node's block of the shared
// file beside the output (OUTPUT.heartbeat, node-major: node 0's ranks in local order, then
// node 1's; world order under block placement) with one pwrite a second, and an fdatasync
// every kSyncEvery writes only (NFS shows other clients what was synced; Lustre and GPFS show
// a write at once). The writer is the lowest local rank that opened the file and whose record
// moved lately, so a stopped writer is replaced by the next rank of its node within
// kWriterStaleS.
//
// A firing guard reads its own node's ranks from memory (fresh whatever the file system does)
// and the other nodes' from the file. A rank on another node is judged silent only when its
// node's block moved (the file system delivered) and its record did not; a node whose block did
// not move at all is said to be so, with the file system named as a possible cause.
//
// The beat thread and the firing guard call put(), publish() and read() without MPI (the
// program asks only for MPI_THREAD_FUNNELED); the constructor and release() are collective and
// run on the main thread.
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include <mpi.h>

#include "runtime/mpi.hpp"

namespace rb {

class NodeHeartbeat {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kSlotBytes = 64;  // = Watchdog::kSlotBytes
  static constexpr double kWriterStaleS = 2.5;   // a record unmoved this long: not the writer
  static constexpr unsigned kSyncEvery = 3;      // an fdatasync every 3rd write of the file

  // Collective over `world` and `node` (every rank of `node` is in `world`; of `node`, the ranks
  // that share memory form the heartbeat's node, the simulated node on one machine). `shared_path`
  // is the file rank 0 created empty; each rank opens it for writing (any may become its node's
  // writer), refusing anything but a regular file. A failure is kept in error(): the rank
  // still beats in memory, it only never writes the file.
  NodeHeartbeat(const std::string& shared_path, MPI_Comm world, MPI_Comm node);
  ~NodeHeartbeat();  // closes the file; the window is left to release() or MPI_Finalize
  NodeHeartbeat(const NodeHeartbeat&) = delete;
  NodeHeartbeat& operator=(const NodeHeartbeat&) = delete;

  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  int world_size() const { return static_cast<int>(node_of_.size()); }
  int node_of(int rank) const { return node_of_[static_cast<std::size_t>(rank)]; }
  int node() const { return node_of(rank_); }

  // This rank's slot into its record (thread-safe).
  void put(const std::string& slot);
  // When this rank is its node's writer (judged at `now`), writes the node's block to the file;
  // returns whether it wrote. Called by one thread (the beat thread).
  bool publish(Clock::time_point now);
  unsigned long long writes() const { return writes_; }  // publish()es that wrote (tests)
  // Every rank's slot in world order: this node's from memory, the others' from the file
  // (opened anew: on NFS, open revalidates the cache); "" where nothing was read.
  std::vector<std::string> read() const;
  // Collective over the node communicator: frees the window. The beat thread must be stopped.
  void release();

 private:
  struct Record;
  Record* record(int local) const;
  std::string local_slot(int local) const;

  std::string path_, error_;
  int rank_ = 0, local_rank_ = 0, local_size_ = 1, fd_ = -1;
  Comm node_;                     // this node's ranks that share memory with this one
  std::vector<int> node_of_;      // world rank -> node
  std::vector<int> file_pos_;     // world rank -> slot index in the file
  std::vector<int> local_world_;  // local rank -> world rank
  MPI_Win win_ = MPI_WIN_NULL;
  char* base_ = nullptr;
  std::mutex put_mutex_;
  std::vector<unsigned long long> seen_;  // the records' counters at the last publish()
  std::vector<Clock::time_point> moved_;  // when each record last moved
  unsigned long long writes_ = 0;
};

// Per world rank, from `before` and `after` (read() twice): whether it is on another node than
// this rank's and none of its node's slots changed (nothing from that node reached the file).
std::vector<bool> quiet_node_ranks(const NodeHeartbeat& beats,
                                   const std::vector<std::string>& before,
                                   const std::vector<std::string>& after);

}  // namespace rb
