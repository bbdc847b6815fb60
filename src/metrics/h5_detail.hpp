#pragma once
// Internals shared by the HDF5 writer's files (src/metrics/h5_*.cpp only): the handle classes,
// error checks that name the failed call and object (with the file system's side of a failed
// write), the state of the output file being written, the number types, and agreed() (every
// rank learns whether a collective HDF5 call failed anywhere).
#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/mpi_util.hpp"

namespace rb::h5 {

// ---------------------------------------------------------------------------------------
// Handle: one hid_t and the function that closes it.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t id() const { return id_; }
  // Forgets the id without closing it: for a file whose I/O failed, where a collective close
  // would wait forever on the ranks that already gave up.
  void abandon() { id_ = -1; }
  // Returns the close call's status; a stale id (the file was closed with H5F_CLOSE_STRONG,
  // which closes every object in it) is skipped rather than closed twice.
  herr_t reset() {
    herr_t rc = 0;
    if (id_ >= 0 && closer_ != nullptr) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      // After MPI_Finalize an MPI-IO file cannot be closed any more; leaking is the only safe
      // option.
      if (!finalized && H5Iis_valid(id_) > 0) rc = closer_(id_);
    }
    id_ = -1;
    return rc;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

namespace detail {

// HDF5 prints its error stack to stderr by default; we report errors as exceptions instead.
void silence_hdf5();

// The output file this process writes (set by File::create), for the OS's side of a failure.
std::string& written_file();
// Set once a write or flush of that file failed on any rank: the file is then left open
// (File::close abandons it) rather than closed collectively.
bool& io_failed();
// The end (in bytes) of the last dataset written to that file, for File::check_on_disk.
std::uint64_t& written_end();
// Bytes free (for this user) on the file system of the file being written, and its directory;
// false when unknown.
bool output_free_bytes(unsigned long long& free_bytes, std::string& dir);
// A full disk or the file size limit (ulimit -f) named with its numbers; otherwise "".
std::string os_reason();

[[noreturn]] void fail(const std::string& call, const std::string& object);
hid_t check_id(hid_t id, const char* call, const std::string& object);
void check(herr_t rc, const char* call, const std::string& object);

// Local, movable RAII for short-lived ids (types, spaces, property lists, attributes).
class Id {
 public:
  Id(hid_t id, Handle::Closer closer) : id_(id), closer_(closer) {}
  Id(Id&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  Id& operator=(Id&&) = delete;
  ~Id() {
    if (id_ >= 0) closer_(id_);
  }
  hid_t operator*() const { return id_; }

 private:
  hid_t id_;
  Handle::Closer closer_;
};

std::shared_ptr<Handle> shared(hid_t id, Handle::Closer closer);
std::string join_path(const std::string& parent, const std::string& name);
std::string shape_text(const std::vector<std::uint64_t>& dims);
std::uint64_t product(const std::vector<std::uint64_t>& dims);

// The MPI and HDF5 types of the numbers the file holds (double, int64; uint64 for shapes).
template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return MPI_INT64_T;
  else
    return MPI_UINT64_T;
}
template <class T>
hid_t h5_type() {
  return std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
}

template <class T>
void bcast_vector(std::vector<T>& v, MPI_Comm comm) {
  std::uint64_t n = v.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm);
  v.resize(n);
  if (n > 0) MPI_Bcast(v.data(), static_cast<int>(n), mpi_type<T>(), 0, comm);
}

Id vl_utf8_type(const std::string& object);
Id fixed_utf8_type(std::size_t length, const std::string& object);
Id simple_space(const std::vector<std::uint64_t>& dims, const std::string& object);

// Waits for `req` up to a few seconds; false if it did not complete.
bool wait_for(MPI_Request& req);

// Runs `f` on every rank and agrees on the outcome: with collective I/O only the aggregator
// ranks write, so a full disk fails on some ranks and not on others, and a rank that went on
// would wait forever in the next collective call. Every rank throws the lowest failing rank's
// message. A rank that failed while the others still sit inside the same HDF5 call (its
// internal barrier, which the failed rank left early) cannot be agreed with: after
// kAgreeSeconds it prints its message and ends the run (MPI_Abort) instead of spinning.
template <class F>
void agreed(MPI_Comm comm, F&& f) {
  std::string error;
  try {
    f();
  } catch (const std::exception& e) {
    error = e.what();
  }
  int mine = error.empty() ? 0 : 1, any = 0;
  MPI_Request req;
  MPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm, &req);
  if (!error.empty() && !wait_for(req)) {
    std::fprintf(stderr,
                 "ringbench: rank %d: %s; the other ranks are still inside the same HDF5 call "
                 "and cannot be told: ending the run (MPI_Abort)\n",
                 mpi::rank_of(comm), error.c_str());
    std::fflush(stderr);
    MPI_Abort(comm, 1);
  }
  if (error.empty()) MPI_Wait(&req, MPI_STATUS_IGNORE);
  if (!any) return;
  io_failed() = true;
  for (const std::string& e : mpi::gather_strings(error, comm))
    if (!e.empty()) throw std::runtime_error(e);
}

}  // namespace detail
}  // namespace rb::h5
