#include "app/heartbeat.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"

namespace rb {

// A rank's record in the node's window: a sequence counter (odd while the slot is being
// rewritten: a seqlock, so a reader in another process never takes half a slot) and the slot.
// Both processes map the same memory, so the counter must be lock-free (no process-local lock).
struct alignas(64) NodeHeartbeat::Record {
  std::atomic<unsigned long long> seq{0};
  std::atomic<int> writable{0};  // its rank opened the shared file: it may be the writer
  char slot[kSlotBytes] = {};
};
static_assert(std::atomic<unsigned long long>::is_always_lock_free &&
              std::atomic<int>::is_always_lock_free);

namespace {

// Opens the shared file for writing, never through a link and never blocking on a FIFO put
// in its place; "" or why not.
std::string open_shared(const std::string& path, int& fd) {
  fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "cannot open the heartbeat file " + path + ": " + std::strerror(errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fd = -1;
    return "the heartbeat file " + path + " is not a regular file";
  }
  return "";
}

// The whole shared file as it is now (bounded by `bytes`); "" when it cannot be read.
std::string read_shared(const std::string& path, std::size_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::string all(bytes, '\0');
  struct stat st {};
  ssize_t got = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) got = ::pread(fd, all.data(), bytes, 0);
  ::close(fd);
  all.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return all;
}

// Nodes are numbered by their lowest world rank (local rank 0's: the node split keeps world
// order); the file holds node 0's slots in local order, then node 1's, ... Fills, per world
// rank, its node and its slot's index in the file. Collective over `world`.
void node_layout(MPI_Comm world, MPI_Comm node, std::vector<int>& node_of,
                 std::vector<int>& file_pos) {
  int leader = mpi::rank_of(world);
  MPI_Bcast(&leader, 1, MPI_INT, 0, node);
  const std::size_t n = static_cast<std::size_t>(mpi::size_of(world));
  int mine[2] = {leader, mpi::rank_of(node)};
  std::vector<int> all(2 * n);
  MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, world);
  std::vector<int> leaders;
  for (std::size_t r = 0; r < n; ++r) leaders.push_back(all[2 * r]);
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  std::vector<int> start(leaders.size() + 1, 0);  // node k's slots: [start[k], start[k + 1])
  node_of.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    node_of[r] = static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), all[2 * r]) -
                                  leaders.begin());
    ++start[static_cast<std::size_t>(node_of[r]) + 1];
  }
  for (std::size_t k = 1; k < start.size(); ++k) start[k] += start[k - 1];
  file_pos.resize(n);
  for (std::size_t r = 0; r < n; ++r)
    file_pos[r] = start[static_cast<std::size_t>(node_of[r])] + all[2 * r + 1];
}

}  // namespace

NodeHeartbeat::NodeHeartbeat(const std::string& shared_path, MPI_Comm world, MPI_Comm node)
    : path_(shared_path), rank_(mpi::rank_of(world)) {
  // The ranks of `node` that share memory: all of them, unless a simulated node spans real
  // ones (--ranks-per-node above a real node's size), where the window could not be shared.
  MPI_Comm shared = MPI_COMM_NULL;
  RB_MPI_CHECK(
      MPI_Comm_split_type(node, MPI_COMM_TYPE_SHARED, mpi::rank_of(node), MPI_INFO_NULL, &shared));
  node_ = Comm(shared);
  local_rank_ = node_.rank();
  local_size_ = node_.size();
  node_layout(world, node_.get(), node_of_, file_pos_);
  local_world_.resize(static_cast<std::size_t>(local_size_));
  MPI_Allgather(&rank_, 1, MPI_INT, local_world_.data(), 1, MPI_INT, node_.get());

  // One allocation, local rank 0's, that every rank of the node maps (records in local order).
  const MPI_Aint bytes =
      local_rank_ == 0 ? static_cast<MPI_Aint>(local_size_) * MPI_Aint(sizeof(Record)) : 0;
  void* own = nullptr;
  RB_MPI_CHECK(MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node_.get(), &own, &win_));
  MPI_Aint size = 0;
  int unit = 0;
  void* base = nullptr;
  RB_MPI_CHECK(MPI_Win_shared_query(win_, 0, &size, &unit, &base));
  base_ = static_cast<char*>(base);
  if (local_rank_ == 0)
    for (int l = 0; l < local_size_; ++l) new (record(l)) Record();
  MPI_Barrier(node_.get());  // the records exist before any rank writes to them

  error_ = open_shared(path_, fd_);
  record(local_rank_)->writable.store(fd_ >= 0 ? 1 : 0, std::memory_order_release);
  MPI_Barrier(node_.get());  // every rank's writable is set before any beat thread elects a writer
  seen_.assign(static_cast<std::size_t>(local_size_), 0);
  moved_.assign(static_cast<std::size_t>(local_size_), Clock::now());
}

NodeHeartbeat::~NodeHeartbeat() {
  if (fd_ >= 0) ::close(fd_);
}

NodeHeartbeat::Record* NodeHeartbeat::record(int local) const {
  return reinterpret_cast<Record*>(base_ + static_cast<std::size_t>(local) * sizeof(Record));
}

void NodeHeartbeat::put(const std::string& slot) {
  std::lock_guard<std::mutex> lock(put_mutex_);
  Record* r = record(local_rank_);
  const unsigned long long s = r->seq.load(std::memory_order_relaxed);
  r->seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  std::memset(r->slot, 0, kSlotBytes);
  std::memcpy(r->slot, slot.data(), std::min(slot.size(), kSlotBytes));
  r->seq.store(s + 2, std::memory_order_release);
}

// A consistent copy of a record's slot; after many tries (its writer stopped mid-write, which
// a SIGSTOP can do) the last copy, as it is.
std::string NodeHeartbeat::local_slot(int local) const {
  const Record* r = record(local);
  std::string slot(kSlotBytes, '\0');
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const unsigned long long before = r->seq.load(std::memory_order_acquire);
    std::memcpy(slot.data(), r->slot, kSlotBytes);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 == 0 && r->seq.load(std::memory_order_relaxed) == before) break;
  }
  return slot;
}

bool NodeHeartbeat::publish(Clock::time_point now) {
  int writer = local_rank_;
  for (int l = local_size_ - 1; l >= 0; --l) {
    const std::size_t i = static_cast<std::size_t>(l);
    const unsigned long long seq = record(l)->seq.load(std::memory_order_acquire);
    if (seq != seen_[i]) {
      seen_[i] = seq;
      moved_[i] = now;
    }
    if (l < writer && record(l)->writable.load(std::memory_order_acquire) != 0 &&
        std::chrono::duration<double>(now - moved_[i]).count() < kWriterStaleS)
      writer = l;
  }
  if (writer != local_rank_ || fd_ < 0) return false;
  std::string block;
  for (int l = 0; l < local_size_; ++l) block += local_slot(l);
  const off_t at = static_cast<off_t>(file_pos_[static_cast<std::size_t>(local_world_[0])]) *
                   static_cast<off_t>(kSlotBytes);
  if (::pwrite(fd_, block.data(), block.size(), at) != static_cast<ssize_t>(block.size()))
    return false;
  if (++writes_ % kSyncEvery == 0) ::fdatasync(fd_);  // NFS: what other clients can see
  return true;
}

std::vector<std::string> NodeHeartbeat::read() const {
  std::vector<std::string> slots(node_of_.size());
  const bool remote =
      std::any_of(node_of_.begin(), node_of_.end(), [this](int n) { return n != node(); });
  if (remote) {
    const std::string all = read_shared(path_, node_of_.size() * kSlotBytes);
    for (std::size_t r = 0; r < slots.size(); ++r) {
      const std::size_t at = static_cast<std::size_t>(file_pos_[r]) * kSlotBytes;
      if (node_of_[r] != node() && at + kSlotBytes <= all.size())
        slots[r] = all.substr(at, kSlotBytes);
    }
  }
  for (int l = 0; l < local_size_; ++l)
    slots[static_cast<std::size_t>(local_world_[static_cast<std::size_t>(l)])] = local_slot(l);
  return slots;
}

void NodeHeartbeat::release() {
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
  base_ = nullptr;
}

std::vector<bool> quiet_node_ranks(const NodeHeartbeat& beats,
                                   const std::vector<std::string>& before,
                                   const std::vector<std::string>& after) {
  const int n = beats.world_size();
  std::vector<bool> moved(static_cast<std::size_t>(n), false);  // per node (at most n nodes)
  for (int r = 0; r < n; ++r)
    if (before[std::size_t(r)] != after[std::size_t(r)])
      moved[std::size_t(beats.node_of(r))] = true;
  std::vector<bool> quiet(static_cast<std::size_t>(n), false);
  for (int r = 0; r < n; ++r)
    quiet[std::size_t(r)] =
        beats.node_of(r) != beats.node() && !moved[std::size_t(beats.node_of(r))];
  return quiet;
}

}  // namespace rb
