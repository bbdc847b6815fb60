#pragma once
// Out-of-memory points of the compute, memory and collectives sweeps (issue #18 item 4), as the
// ring_attention sweep has them: an allocation that fails at a point makes the point `oom` on
// every rank, records what this rank asked for and what was free, and the sweep goes on.
//
// Three ways a host allocation fails, each handled here:
//  - the allocator says so: attn::OutOfMemory (attention backends), std::bad_alloc (Kokkos
//    views, new), caught around the point;
//  - the address space is limited (ulimit -v, prlimit --as) or the kernel refuses an obvious
//    overcommit: malloc returns null. Some buffers (profiling/timing.hpp's HostBuffer) report
//    that like any other error, so the bytes are reserved once, untouched, before the point:
//    a null there is an out-of-memory whoever allocates later;
//  - the allocation succeeds but the memory is not there (Linux overcommits): touching it would
//    wake the OOM killer, which ends the rank without a message. So a point whose ranks on this
//    node together need more than MemAvailable is not tried.
// Validation (check_host_memory_fits) refuses what cannot fit in the node's physical memory at
// all; these checks cover what does not fit now.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include <mpi.h>

#include "backend.hpp"
#include "config/bytes.hpp"
#include "config/node.hpp"
#include "metrics/table.hpp"
#include "runtime/mpi_util.hpp"

namespace rb::oom {

// A /proc/meminfo field in bytes ("MemAvailable", "MemTotal"); 0 when unknown.
inline std::uint64_t meminfo_bytes(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kb = 0;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == field + ":") return kb * 1024;
  }
  return 0;
}

// What one rank's failed allocation at a point was.
struct Record {
  std::string message;          // "": this rank did not run out (maybe another one did)
  std::int64_t requested = -1;  // bytes this rank asked for
  std::int64_t free = -1;       // MemAvailable (host) or the device's free bytes at the time
  bool ran_out() const { return !message.empty(); }
};

inline Record record_of(const std::string& what, std::uint64_t requested, std::uint64_t free,
                        const std::string& why) {
  return {what + ": out of memory allocating " + std::to_string(requested) + " B (" +
              std::to_string(free) + " B available" + (why.empty() ? "" : "; " + why) + ")",
          static_cast<std::int64_t>(requested), static_cast<std::int64_t>(free)};
}

// Whether `need` bytes on each of `ranks_on_node` ranks fit in `available` bytes.
inline bool fits(std::uint64_t need, int ranks_on_node, std::uint64_t available) {
  const std::uint64_t ranks = ranks_on_node > 0 ? static_cast<std::uint64_t>(ranks_on_node) : 1;
  return available == 0 || need <= available / ranks;  // 0: unknown, let the allocator say
}

// Runs `f` (allocate, measure) unless this rank's `need` host bytes cannot be had now; an
// allocation failure inside `f` becomes the returned Record. `available` is MemAvailable read
// before the point's barrier, so that no rank of the node has taken its share yet (read after,
// a late rank would see the others' buffers and refuse a point that fits). Not collective: the
// caller agrees with on_any_rank() before the next collective call of the point.
template <class F>
Record attempt(const std::string& what, std::uint64_t need, int ranks_on_node,
               std::uint64_t available, F&& f) {
  if (need > 0) {
    if (!fits(need, ranks_on_node, available))
      return record_of(what, need, available,
                       "not tried: the " + std::to_string(ranks_on_node) +
                           " ranks on this node need " + format_bytes(static_cast<double>(need)) +
                           " each");
    void* reserved = std::malloc(need);  // untouched: costs address space, not memory
    if (reserved == nullptr) return record_of(what, need, available, "the allocation failed");
    std::free(reserved);
  }
  try {
    f();
  } catch (const attn::OutOfMemory& e) {
    return {e.what(), static_cast<std::int64_t>(e.requested()),
            static_cast<std::int64_t>(e.free_bytes())};
  } catch (const std::bad_alloc& e) {
    return record_of(what, need, meminfo_bytes("MemAvailable"), e.what());
  }
  return {};
}

// Collective over `world`, once per point on every rank: whether any rank ran out, so every
// rank skips the point's collective calls together.
inline bool on_any_rank(const Record& r, MPI_Comm world) {
  return mpi::any_rank(r.ran_out(), world);
}

// The point status and out-of-memory columns (the names ring_attention uses).
inline void declare_columns(h5::PointsTable& t) {
  t.text_metric("status", {"1", "ok | oom (the same on every rank)"});
  t.int_metric("oom_requested_bytes",
               {"B", "allocation that failed on this rank (-1: this rank did not run out)"});
  t.int_metric("oom_free_bytes",
               {"B", "memory available (host: MemAvailable) when that allocation failed"});
  t.text_metric("oom_message", {"1", "the allocation failure on this rank (empty if none)"});
}

// `oom`: the point ran out on some rank (agreed by on_any_rank).
inline void record_status(h5::PointsTable& t, std::size_t pi, bool oom, const Record& r) {
  t.set_text("status", pi, oom ? "oom" : "ok");
  if (!r.ran_out()) return;
  t.set_int("oom_requested_bytes", pi, r.requested);
  t.set_int("oom_free_bytes", pi, r.free);
  t.set_text("oom_message", pi, r.message);
}

// Validation: refuses (at `key`) a sweep whose host buffers, `need` bytes on each of the
// `ranks_on_node` ranks of this node, exceed the node's physical memory. Nothing is checked
// when the memory is unknown (0), e.g. planning on a login node for another machine.
inline void check_host_memory_fits(const cfg::Node& n, const std::string& key, std::uint64_t need,
                                   int ranks_on_node, std::uint64_t node_memory,
                                   const std::string& what) {
  if (node_memory == 0 || fits(need, ranks_on_node, node_memory)) return;
  n.fail(key, what + " needs " + format_bytes(static_cast<double>(need)) +
                  " of host memory per "
                  "rank, " +
                  std::to_string(ranks_on_node) + " rank(s) on this node: more than its " +
                  format_bytes(static_cast<double>(node_memory)) +
                  " of physical memory (MemTotal); "
                  "use a smaller value or fewer ranks per node");
}

}  // namespace rb::oom
