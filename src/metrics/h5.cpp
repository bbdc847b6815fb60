// Parallel HDF5 writer (C API only). Every public call is collective over the file's
// communicator; values that must be identical on every rank (attribute values, shapes of
// shared data) are broadcast from rank 0 first, because parallel HDF5 silently corrupts the
// file when ranks disagree on metadata. Shape mismatches between ranks are detected with a
// reduction BEFORE any HDF5 call, so every rank throws instead of some ranks hanging.
#include "metrics/h5.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <system_error>
#include <utility>

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
      // After MPI_Finalize an MPI-IO file cannot be closed any more; leaking is the only safe option.
      if (!finalized && H5Iis_valid(id_) > 0) rc = closer_(id_);
    }
    id_ = -1;
    return rc;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

namespace {

// HDF5 prints its error stack to stderr by default; we report errors as exceptions instead.
void silence_hdf5() {
  static const bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// The innermost messages of the current HDF5 error stack ("unable to open file: ...").
std::string hdf5_reason() {
  std::string out;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* err, void* data) -> herr_t {
        auto* s = static_cast<std::string*>(data);
        if (n >= 3 || err->desc == nullptr) return 0;
        if (!s->empty()) *s += "; ";
        *s += err->desc;
        return 0;
      },
      &out);
  H5Eclear2(H5E_DEFAULT);
  return out;
}

// The output file this process writes (set by File::create), for the OS's side of a failure.
std::string& written_file() {
  static std::string path;
  return path;
}

// Set once a write or flush of that file failed on any rank: the file is then left open
// (File::close abandons it) rather than closed collectively.
bool& io_failed() {
  static bool failed = false;
  return failed;
}

// The end (in bytes) of the last dataset written to that file, for File::check_on_disk.
std::uint64_t& written_end() {
  static std::uint64_t end = 0;
  return end;
}

// HDF5's MPI-IO driver says only "file write failed" and errno is gone by the time it returns,
// so a failure is explained from the file system: a full disk or the file size limit
// (ulimit -f) is named with its numbers; otherwise "".
// Bytes free (for this user) on the file system of the file being written, and its directory;
// false when unknown.
bool output_free_bytes(unsigned long long& free_bytes, std::string& dir) {
  namespace fs = std::filesystem;
  const std::string& file = written_file();
  dir = fs::path(file).has_parent_path() ? fs::path(file).parent_path().string() : ".";
  struct statvfs vfs {};
  if (file.empty() || ::statvfs(dir.c_str(), &vfs) != 0) return false;
  free_bytes = static_cast<unsigned long long>(vfs.f_bavail) * static_cast<unsigned long long>(vfs.f_frsize);
  return true;
}

std::string os_reason() {
  namespace fs = std::filesystem;
  const std::string& file = written_file();
  if (file.empty()) return "";
  constexpr unsigned long long kNearlyFull = 1ull << 20;
  unsigned long long free_bytes = 0;
  std::string dir;
  if (output_free_bytes(free_bytes, dir) && free_bytes < kNearlyFull)
    return "No space left on device (" + std::to_string(free_bytes) +
           " bytes free on the file system of '" + dir + "')";
  struct rlimit limit {};
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && !ec &&
      size + kNearlyFull >= limit.rlim_cur)
    return "File too large: the file size limit (ulimit -f) is " + std::to_string(limit.rlim_cur) +
           " bytes and the file has " + std::to_string(size);
  return "";
}

[[noreturn]] void fail(const std::string& call, const std::string& object) {
  const std::string reason = hdf5_reason();
  const std::string os = os_reason();
  throw std::runtime_error("HDF5 " + call + " failed for '" + object + "'" +
                           (os.empty() ? "" : ": " + os) +
                           (reason.empty() ? "" : (os.empty() ? ": " : "; ") + reason));
}

hid_t check_id(hid_t id, const char* call, const std::string& object) {
  if (id < 0) fail(call, object);
  return id;
}

void check(herr_t rc, const char* call, const std::string& object) {
  if (rc < 0) fail(call, object);
}

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

std::shared_ptr<Handle> shared(hid_t id, Handle::Closer closer) {
  return std::make_shared<Handle>(id, closer);
}

std::string join_path(const std::string& parent, const std::string& name) {
  if (parent.empty() || parent == "/") return "/" + name;
  return parent + "/" + name;
}

std::string shape_text(const std::vector<std::uint64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::uint64_t product(const std::vector<std::uint64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), std::uint64_t{1},
                         [](std::uint64_t a, std::uint64_t b) { return a * b; });
}

using mpi::any_rank;

// The MPI and HDF5 types of the numbers the file holds (double, int64; uint64 for shapes).
template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
  else return MPI_UINT64_T;
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

Id vl_utf8_type(const std::string& object) {
  Id t(check_id(H5Tcopy(H5T_C_S1), "H5Tcopy", object), H5Tclose);
  check(H5Tset_size(*t, H5T_VARIABLE), "H5Tset_size", object);
  check(H5Tset_cset(*t, H5T_CSET_UTF8), "H5Tset_cset", object);
  return t;
}

Id fixed_utf8_type(std::size_t length, const std::string& object) {
  Id t(check_id(H5Tcopy(H5T_C_S1), "H5Tcopy", object), H5Tclose);
  // HDF5 has no zero-length fixed strings; an all-empty column gets one NUL byte per entry.
  check(H5Tset_size(*t, std::max<std::size_t>(length, 1)), "H5Tset_size", object);
  check(H5Tset_cset(*t, H5T_CSET_UTF8), "H5Tset_cset", object);
  // NULLPAD: a string of exactly `length` bytes needs no terminator; readers strip the padding.
  check(H5Tset_strpad(*t, H5T_STR_NULLPAD), "H5Tset_strpad", object);
  return t;
}

Id simple_space(const std::vector<std::uint64_t>& dims, const std::string& object) {
  if (dims.empty()) return Id(check_id(H5Screate(H5S_SCALAR), "H5Screate", object), H5Sclose);
  std::vector<hsize_t> d(dims.begin(), dims.end());
  return Id(check_id(H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr),
                     "H5Screate_simple", object),
            H5Sclose);
}

Id collective_dxpl(const std::string& object) {
  Id dxpl(check_id(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate", object), H5Pclose);
  check(H5Pset_dxpl_mpio(*dxpl, H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio", object);
  return dxpl;
}

// Removes `name` from `obj` if it exists, so that the attribute can be written anew.
void delete_attr_if_exists(hid_t obj, const std::string& name, const std::string& object) {
  const htri_t e = H5Aexists(obj, name.c_str());
  check(e, "H5Aexists", object + "@" + name);
  if (e > 0) check(H5Adelete(obj, name.c_str()), "H5Adelete", object + "@" + name);
}

void refuse_existing_attr(hid_t obj, const std::string& name, const std::string& object) {
  const htri_t e = H5Aexists(obj, name.c_str());
  check(e, "H5Aexists", object + "@" + name);
  if (e > 0)
    throw std::runtime_error("attribute '" + name + "' already exists on '" + object +
                             "' (use set_attr to overwrite it)");
}

// Every rank passes the same (broadcast) value: HDF5 requires identical attribute data.
void write_string_attr(hid_t obj, const std::string& object, const std::string& name,
                       std::string value, MPI_Comm comm) {
  mpi::broadcast_string(value, comm);
  const std::string where = object + "@" + name;
  Id type = vl_utf8_type(where);
  Id space(check_id(H5Screate(H5S_SCALAR), "H5Screate", where), H5Sclose);
  Id attr(check_id(H5Acreate2(obj, name.c_str(), *type, *space, H5P_DEFAULT, H5P_DEFAULT),
                   "H5Acreate2", where),
          H5Aclose);
  const char* p = value.c_str();
  check(H5Awrite(*attr, *type, &p), "H5Awrite", where);
}

template <class T>
void write_numeric_attr(hid_t obj, const std::string& object, const std::string& name,
                        std::vector<T> values, bool scalar, MPI_Comm comm) {
  bcast_vector(values, comm);
  const std::string where = object + "@" + name;
  Id space = scalar ? simple_space({}, where) : simple_space({values.size()}, where);
  Id attr(check_id(H5Acreate2(obj, name.c_str(), h5_type<T>(), *space, H5P_DEFAULT, H5P_DEFAULT),
                   "H5Acreate2", where),
          H5Aclose);
  if (!values.empty()) check(H5Awrite(*attr, h5_type<T>(), values.data()), "H5Awrite", where);
}

void check_meta(const std::string& dataset, const Meta& meta) {
  if (meta.units.empty() || meta.description.empty())
    throw std::runtime_error("dataset '" + dataset + "' needs non-empty units and description (got units '" +
                             meta.units + "', description '" + meta.description + "')");
  if (meta.role != "key" && meta.role != "metric")
    throw std::runtime_error("dataset '" + dataset + "': role must be 'key' or 'metric', not '" +
                             meta.role + "'");
}

void write_meta(hid_t dset, const std::string& dataset, const Meta& meta, MPI_Comm comm) {
  write_string_attr(dset, dataset, "units", meta.units, comm);
  write_string_attr(dset, dataset, "description", meta.description, comm);
  write_string_attr(dset, dataset, "role", meta.role, comm);
}

std::shared_ptr<Handle> create_dataset(hid_t parent, const std::string& name, const std::string& dataset,
                                       hid_t type, const std::vector<std::uint64_t>& dims) {
  Id space = simple_space(dims, dataset);
  return shared(check_id(H5Dcreate2(parent, name.c_str(), type, *space, H5P_DEFAULT, H5P_DEFAULT,
                                    H5P_DEFAULT),
                         "H5Dcreate2", dataset),
                H5Dclose);
}

// Every rank must hold a row of the same shape; checked with one reduction so all ranks
// agree on the verdict (a mismatch discovered inside HDF5 would hang or corrupt the file).
void check_same_row_shape(const std::string& dataset, std::size_t elements,
                          const std::vector<std::uint64_t>& row_dims, MPI_Comm comm) {
  const bool size_ok = product(row_dims) == elements;
  // [ndims, size_bad] reduced with MIN and MAX in one go (negated for MIN).
  std::int64_t local[4] = {static_cast<std::int64_t>(row_dims.size()), size_ok ? 0 : 1,
                           -static_cast<std::int64_t>(row_dims.size()), 0};
  std::int64_t global[4];
  MPI_Allreduce(local, global, 4, MPI_INT64_T, MPI_MAX, comm);
  const std::int64_t max_nd = global[0], min_nd = -global[2];
  if (global[1] != 0) {
    throw std::runtime_error("per-rank dataset '" + dataset + "': " +
                             (size_ok ? std::string("another rank's")
                                      : "this rank's (" + std::to_string(elements) + " values)") +
                             " row does not match its shape; this rank's shape is " +
                             shape_text(row_dims));
  }
  if (min_nd != max_nd) {
    throw std::runtime_error("per-rank dataset '" + dataset +
                             "': ranks disagree on the row's number of dimensions (from " +
                             std::to_string(min_nd) + " to " + std::to_string(max_nd) +
                             "); this rank's shape is " + shape_text(row_dims));
  }
  const std::size_t nd = row_dims.size();
  if (nd == 0) return;
  std::vector<std::uint64_t> mx(nd), mn(nd);
  MPI_Allreduce(row_dims.data(), mx.data(), static_cast<int>(nd), MPI_UINT64_T, MPI_MAX, comm);
  MPI_Allreduce(row_dims.data(), mn.data(), static_cast<int>(nd), MPI_UINT64_T, MPI_MIN, comm);
  if (mx != mn) {
    throw std::runtime_error("per-rank dataset '" + dataset +
                             "': ranks passed rows of different shapes (smallest " + shape_text(mn) +
                             ", largest " + shape_text(mx) + "; this rank " + shape_text(row_dims) +
                             "); every rank must pass the same shape");
  }
}

// How long a rank whose collective HDF5 call failed waits for the others to report theirs.
constexpr double kAgreeSeconds = 5.0;

// Waits for `req` up to kAgreeSeconds; false if it did not complete.
bool wait_for(MPI_Request& req) {
  const double until = MPI_Wtime() + kAgreeSeconds;
  int done = 0;
  while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
    if (MPI_Wtime() > until) return false;
    ::usleep(1000);
  }
  return true;
}

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

void collective_write(hid_t dset, hid_t mem_type, hid_t mspace, hid_t fspace, const void* buf,
                      const std::string& dataset, MPI_Comm comm) {
  Id dxpl = collective_dxpl(dataset);
  agreed(comm, [&] {
    check(H5Dwrite(dset, mem_type, mspace, fspace, *dxpl, buf), "H5Dwrite", dataset);
  });
  const haddr_t offset = H5Dget_offset(dset);  // HADDR_UNDEF unless contiguous and allocated
  if (offset != HADDR_UNDEF)
    written_end() = std::max<std::uint64_t>(written_end(), offset + H5Dget_storage_size(dset));
}

// Collective: rank `rank` writes its `count` values (the row [rank, ...] of a dataset of
// shape `dims`). Every rank has the same count (checked by the caller); a zero-sized dataset
// has nothing to write.
void write_rank_row(hid_t dset, hid_t mem_type, const std::vector<std::uint64_t>& dims, int rank,
                    std::size_t count, const void* buf, const std::string& dataset, MPI_Comm comm) {
  if (count == 0) return;
  Id fspace(check_id(H5Dget_space(dset), "H5Dget_space", dataset), H5Sclose);
  std::vector<hsize_t> start(dims.size(), 0), extent(dims.begin(), dims.end());
  start[0] = static_cast<hsize_t>(rank);
  extent[0] = 1;
  check(H5Sselect_hyperslab(*fspace, H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr),
        "H5Sselect_hyperslab", dataset);
  Id mspace = simple_space({count}, dataset);
  collective_write(dset, mem_type, *mspace, *fspace, buf, dataset, comm);
}

// A [world, row_dims...] dataset of `type` holding each rank's `count` values at its row.
void per_rank_rows(hid_t parent, const std::string& name, const std::string& dataset, hid_t type,
                   std::size_t count, const void* buf, const std::vector<std::uint64_t>& row_dims,
                   const Meta& meta, MPI_Comm comm) {
  check_meta(dataset, meta);
  check_same_row_shape(dataset, count, row_dims, comm);
  std::vector<std::uint64_t> dims{static_cast<std::uint64_t>(mpi::size_of(comm))};
  dims.insert(dims.end(), row_dims.begin(), row_dims.end());
  auto dset = create_dataset(parent, name, dataset, type, dims);
  write_rank_row(dset->id(), type, dims, mpi::rank_of(comm), count, buf, dataset, comm);
  write_meta(dset->id(), dataset, meta, comm);
}

template <class T>
void per_rank_impl(hid_t parent, const std::string& name, const std::string& dataset,
                   const std::vector<T>& row, const std::vector<std::uint64_t>& row_dims,
                   const Meta& meta, MPI_Comm comm) {
  per_rank_rows(parent, name, dataset, h5_type<T>(), row.size(), row.data(), row_dims, meta, comm);
}

// Rank 0 writes the whole extent, the others take part in the collective call with empty
// selections. `buf` is only read on rank 0.
void write_from_rank0(hid_t dset, hid_t mem_type, const void* buf, const std::string& dataset,
                      MPI_Comm comm) {
  Id fspace(check_id(H5Dget_space(dset), "H5Dget_space", dataset), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(*fspace);
  check(static_cast<herr_t>(n < 0 ? -1 : 0), "H5Sget_simple_extent_npoints", dataset);
  if (n == 0) return;
  Id mspace = simple_space({static_cast<std::uint64_t>(n)}, dataset);
  if (mpi::rank_of(comm) != 0) {
    check(H5Sselect_none(*fspace), "H5Sselect_none", dataset);
    check(H5Sselect_none(*mspace), "H5Sselect_none", dataset);
  }
  collective_write(dset, mem_type, *mspace, *fspace, buf, dataset, comm);
}

template <class T>
void shared_impl(hid_t parent, const std::string& name, const std::string& dataset,
                 const std::vector<T>& data, const std::vector<std::uint64_t>& dims_in,
                 const Meta& meta, MPI_Comm comm) {
  check_meta(dataset, meta);
  // Rank 0's shape is the file's; a rank whose data disagrees is an error on every rank.
  std::vector<std::uint64_t> dims = dims_in;
  bcast_vector(dims, comm);
  const bool bad = dims != dims_in || product(dims_in) != data.size();
  if (any_rank(bad, comm))
    throw std::runtime_error("shared dataset '" + dataset + "': every rank must pass the same shape and " +
                             "matching data (rank 0's shape " + shape_text(dims) + ", this rank's " +
                             shape_text(dims_in) + " with " + std::to_string(data.size()) + " values)");
  auto dset = create_dataset(parent, name, dataset, h5_type<T>(), dims);
  write_from_rank0(dset->id(), h5_type<T>(), data.data(), dataset, comm);
  write_meta(dset->id(), dataset, meta, comm);
}

// Packs strings into fixed-width cells (NUL padded) for a fixed-length string dataset.
std::vector<char> pack_fixed(const std::vector<std::string>& strings, std::size_t width) {
  std::vector<char> buf(strings.size() * width, '\0');
  for (std::size_t i = 0; i < strings.size(); ++i)
    std::memcpy(buf.data() + i * width, strings[i].data(), strings[i].size());
  return buf;
}

std::shared_ptr<Handle> open_serial(const std::string& file) {
  silence_hdf5();
  Id fapl(check_id(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate", file), H5Pclose);
  // The writer may still hold the file open (flush-then-read); do not fight over locks.
  check(H5Pset_file_locking(*fapl, false, true), "H5Pset_file_locking", file);
  return shared(check_id(H5Fopen(file.c_str(), H5F_ACC_RDONLY, *fapl), "H5Fopen", file), H5Fclose);
}

template <class T>
std::vector<T> read_numeric(const std::string& file, const std::string& dataset,
                            std::vector<std::uint64_t>* dims) {
  auto f = open_serial(file);
  Id d(check_id(H5Dopen2(f->id(), dataset.c_str(), H5P_DEFAULT), "H5Dopen2", file + ":" + dataset), H5Dclose);
  Id space(check_id(H5Dget_space(*d), "H5Dget_space", dataset), H5Sclose);
  const int nd = H5Sget_simple_extent_ndims(*space);
  check(nd, "H5Sget_simple_extent_ndims", dataset);
  std::vector<hsize_t> shape(static_cast<std::size_t>(nd));
  if (nd > 0) check(H5Sget_simple_extent_dims(*space, shape.data(), nullptr), "H5Sget_simple_extent_dims", dataset);
  if (dims) dims->assign(shape.begin(), shape.end());
  std::uint64_t n = 1;
  for (hsize_t s : shape) n *= s;
  std::vector<T> out(n);
  if (n > 0) check(H5Dread(*d, h5_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "H5Dread", file + ":" + dataset);
  return out;
}

// Reads a string attribute or dataset whose type is `type` and whose space has `n` elements,
// whichever of variable- or fixed-length it was written as.
template <class ReadFn>
std::vector<std::string> read_string_values(hid_t stored_type, std::size_t n, const std::string& what,
                                            ReadFn read) {
  std::vector<std::string> out(n);
  if (n == 0) return out;
  const htri_t vl = H5Tis_variable_str(stored_type);
  check(vl, "H5Tis_variable_str", what);
  if (vl > 0) {
    Id t = vl_utf8_type(what);
    std::vector<char*> ptrs(n, nullptr);
    check(read(*t, ptrs.data()), "read (variable-length string)", what);
    for (std::size_t i = 0; i < n; ++i) out[i] = ptrs[i] ? ptrs[i] : "";
    // Free the library-allocated strings through HDF5's own allocator.
    for (char* p : ptrs) H5free_memory(p);
  } else {
    const std::size_t width = H5Tget_size(stored_type);
    Id t = fixed_utf8_type(width, what);
    std::vector<char> buf(n * width);
    check(read(*t, buf.data()), "read (fixed-length string)", what);
    for (std::size_t i = 0; i < n; ++i) {
      const char* cell = buf.data() + i * width;
      out[i].assign(cell, strnlen(cell, width));
    }
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Group

Group::Group(std::shared_ptr<Handle> h, MPI_Comm comm, std::string path)
    : h_(std::move(h)), comm_(comm), path_(std::move(path)) {}

static void require_valid(const std::shared_ptr<Handle>& h, const std::string& what) {
  if (!h) throw std::runtime_error("HDF5 group used before it was opened (" + what + ")");
}

bool Group::exists(const std::string& name) const {
  require_valid(h_, "exists " + name);
  // Walk the path one link at a time: H5Lexists fails (instead of answering false) when an
  // intermediate group is missing.
  bool found = true;
  std::string prefix;
  std::size_t pos = 0;
  while (found && pos <= name.size()) {
    std::size_t slash = name.find('/', pos);
    if (slash == std::string::npos) slash = name.size();
    prefix = name.substr(0, slash);
    if (!prefix.empty() && slash > pos) {
      const htri_t e = H5Lexists(h_->id(), prefix.c_str(), H5P_DEFAULT);
      check(e, "H5Lexists", join_path(path_, prefix));
      found = e > 0;
    }
    pos = slash + 1;
  }
  // Collective metadata reads give every rank the same answer; verify, since a disagreement
  // would make the next collective call hang.
  int in[2] = {found ? 1 : 0, found ? -1 : 0}, out[2];
  MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, comm_);
  if (out[0] != -out[1])
    throw std::runtime_error("ranks disagree on whether '" + join_path(path_, name) + "' exists");
  return found;
}

Group Group::group(const std::string& name) {
  require_valid(h_, "group " + name);
  const std::string path = join_path(path_, name);
  hid_t id;
  if (exists(name)) {
    id = check_id(H5Gopen2(h_->id(), name.c_str(), H5P_DEFAULT), "H5Gopen2", path);
  } else {
    Id lcpl(check_id(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate", path), H5Pclose);
    check(H5Pset_create_intermediate_group(*lcpl, 1), "H5Pset_create_intermediate_group", path);
    id = check_id(H5Gcreate2(h_->id(), name.c_str(), *lcpl, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2", path);
  }
  return Group(shared(id, H5Gclose), comm_, path);
}

void Group::attr(const std::string& name, const std::string& value) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_string_attr(h_->id(), path_, name, value, comm_);
}

void Group::attr(const std::string& name, std::int64_t value) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_numeric_attr<std::int64_t>(h_->id(), path_, name, {value}, true, comm_);
}

void Group::attr(const std::string& name, double value) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_numeric_attr<double>(h_->id(), path_, name, {value}, true, comm_);
}

void Group::attr(const std::string& name, const std::vector<std::int64_t>& values) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_numeric_attr<std::int64_t>(h_->id(), path_, name, values, false, comm_);
}

void Group::attr(const std::string& name, const std::vector<double>& values) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_numeric_attr<double>(h_->id(), path_, name, values, false, comm_);
}

void Group::set_attr(const std::string& name, const std::string& value) {
  require_valid(h_, "set_attr " + name);
  delete_attr_if_exists(h_->id(), name, path_);
  write_string_attr(h_->id(), path_, name, value, comm_);
}

// The typed overloads are the public face; one template each does the work.
template <class T>
void Group::per_rank(const std::string& name, const std::vector<T>& row,
                     const std::vector<std::uint64_t>& row_dims, const Meta& meta) {
  require_valid(h_, name);
  per_rank_impl(h_->id(), name, join_path(path_, name), row, row_dims, meta, comm_);
}

template <class T>
void Group::shared_array(const std::string& name, const std::vector<T>& data,
                         const std::vector<std::uint64_t>& dims, const Meta& meta) {
  require_valid(h_, name);
  shared_impl(h_->id(), name, join_path(path_, name), data, dims, meta, comm_);
}

void Group::write_per_rank(const std::string& name, const std::vector<double>& row,
                           const std::vector<std::uint64_t>& row_dims, const Meta& meta) { per_rank(name, row, row_dims, meta); }
void Group::write_per_rank(const std::string& name, const std::vector<std::int64_t>& row,
                           const std::vector<std::uint64_t>& row_dims, const Meta& meta) { per_rank(name, row, row_dims, meta); }
void Group::write_per_rank(const std::string& name, double value, const Meta& meta) { per_rank<double>(name, {value}, {}, meta); }
void Group::write_per_rank(const std::string& name, std::int64_t value, const Meta& meta) { per_rank<std::int64_t>(name, {value}, {}, meta); }
void Group::write_shared(const std::string& name, const std::vector<double>& data,
                         const std::vector<std::uint64_t>& dims, const Meta& meta) { shared_array(name, data, dims, meta); }
void Group::write_shared(const std::string& name, const std::vector<std::int64_t>& data,
                         const std::vector<std::uint64_t>& dims, const Meta& meta) { shared_array(name, data, dims, meta); }

namespace {

// Parallel HDF5 cannot write variable-length data collectively, so string columns are
// fixed-length, as wide as the longest value over ranks. `row_dims` empty: one string per rank.
void per_rank_strings_impl(hid_t parent, const std::string& name, const std::string& dataset,
                           const std::vector<std::string>& row,
                           const std::vector<std::uint64_t>& row_dims, const Meta& meta,
                           MPI_Comm comm) {
  std::uint64_t local = 1, width = 0;
  for (const auto& s : row) local = std::max<std::uint64_t>(local, s.size());
  MPI_Allreduce(&local, &width, 1, MPI_UINT64_T, MPI_MAX, comm);
  Id type = fixed_utf8_type(width, dataset);
  const std::vector<char> cells = pack_fixed(row, width);
  per_rank_rows(parent, name, dataset, *type, row.size(), cells.data(), row_dims, meta, comm);
}

}  // namespace

void Group::write_per_rank_string(const std::string& name, const std::string& value, const Meta& meta) {
  require_valid(h_, name);
  per_rank_strings_impl(h_->id(), name, join_path(path_, name), {value}, {}, meta, comm_);
}

void Group::write_per_rank_strings(const std::string& name, const std::vector<std::string>& row,
                                   const Meta& meta) {
  require_valid(h_, name);
  per_rank_strings_impl(h_->id(), name, join_path(path_, name), row, {row.size()}, meta, comm_);
}

void Group::write_shared_strings(const std::string& name, const std::vector<std::string>& data,
                                 const Meta& meta) {
  require_valid(h_, name);
  const std::string dataset = join_path(path_, name);
  check_meta(dataset, meta);
  // Rank 0's list decides count and width; others only need to agree on the count.
  std::uint64_t hdr[2] = {data.size(), 1};
  for (const auto& s : data) hdr[1] = std::max<std::uint64_t>(hdr[1], s.size());
  MPI_Bcast(hdr, 2, MPI_UINT64_T, 0, comm_);
  if (any_rank(hdr[0] != data.size(), comm_))
    throw std::runtime_error("shared string dataset '" + dataset + "': every rank must pass the same " +
                             "list (rank 0 has " + std::to_string(hdr[0]) + " strings, this rank " +
                             std::to_string(data.size()) + ")");
  Id type = fixed_utf8_type(hdr[1], dataset);
  auto dset = create_dataset(h_->id(), name, dataset, *type, {hdr[0]});
  const std::vector<char> buf = mpi::rank_of(comm_) == 0 ? pack_fixed(data, hdr[1]) : std::vector<char>();
  write_from_rank0(dset->id(), *type, buf.data(), dataset, comm_);
  write_meta(dset->id(), dataset, meta, comm_);
}

// ---------------------------------------------------------------------------------------
// File

namespace {

// An MPI_Info of the run's MPI-IO hints, freed on every path out.
class MpiInfo {
 public:
  explicit MpiInfo(const std::vector<std::pair<std::string, std::string>>& hints) {
    if (hints.empty()) return;
    MPI_Info_create(&info_);
    for (const auto& [key, value] : hints) MPI_Info_set(info_, key.c_str(), value.c_str());
  }
  explicit MpiInfo(MPI_Info owned) : info_(owned) {}  // takes `owned` (MPI_File_get_info's)
  ~MpiInfo() {
    if (info_ != MPI_INFO_NULL) MPI_Info_free(&info_);
  }
  MpiInfo(const MpiInfo&) = delete;
  MpiInfo& operator=(const MpiInfo&) = delete;
  MPI_Info get() const { return info_; }

 private:
  MPI_Info info_ = MPI_INFO_NULL;
};

Id parallel_fapl(MPI_Comm comm, const std::string& path, const IoHints& hints = {}) {
  Id fapl(check_id(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate", path), H5Pclose);
  const MpiInfo info(hints.mpiio);  // HDF5 keeps its own copy
  check(H5Pset_fapl_mpio(*fapl, comm, info.get()), "H5Pset_fapl_mpio", path);
  if (hints.alignment_bytes > 0)
    check(H5Pset_alignment(*fapl, hints.alignment_bytes, hints.alignment_bytes), "H5Pset_alignment", path);
  check(H5Pset_all_coll_metadata_ops(*fapl, true), "H5Pset_all_coll_metadata_ops", path);
  check(H5Pset_coll_metadata_write(*fapl, true), "H5Pset_coll_metadata_write", path);
  // Closing the file closes every group and dataset still open in it (Groups handed out
  // to callers may outlive File::close); the default for MPI-IO would refuse to close.
  check(H5Pset_fclose_degree(*fapl, H5F_CLOSE_STRONG), "H5Pset_fclose_degree", path);
  return fapl;
}

}  // namespace

// The longest path handed to MPI-IO: Open MPI 4.1's shared-file-pointer component copies the
// name into a fixed buffer and aborts the process ("buffer overflow detected") at about 245
// characters (measured: 243 worked, 253 aborted), so longer paths are refused up front.
constexpr std::size_t kMaxMpiioPath = 240;

namespace {

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// What rank 0 writes into the claimed file for every rank to read back: this run's own text,
// so a file of the same name on another node's local disk cannot pass for it.
std::string claim_token(const std::string& host) {
  return "ringbench output claim: host " + host + " pid " + std::to_string(::getpid()) +
         " t " + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "\n";
}

// Rank 0's checks and claim of the output path. Returns the path HDF5 will create (the output
// itself, claimed with O_EXCL so that of two runs racing for it exactly one gets it; or, when
// an existing file or link is replaced, a temporary name beside it) or throws the message.
// The claimed file holds `token` until HDF5 truncates it.
std::string claim_output(const std::string& path, bool force, const std::string& protect,
                         const std::string& token) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const fs::file_status st = fs::symlink_status(p, ec);
  const bool exists = fs::exists(st);
  if (!protect.empty() && fs::equivalent(p, fs::path(protect), ec))
    throw std::runtime_error("output file '" + path + "' is the config file '" + protect +
                             "'; choose another --output");
  if (exists && fs::is_directory(st))
    throw std::runtime_error("output '" + path + "' is a directory; --output names a file");
  if (exists && fs::is_symlink(st) && !force)
    throw std::runtime_error("output '" + path + "' is a symbolic link (to '" +
                             fs::read_symlink(p, ec).string() + "'); ringbench does not write "
                             "through links: choose another --output, or pass --force to "
                             "replace the link itself (never its target)");
  if (exists && !force)
    throw std::runtime_error("output file '" + path + "' already exists; pass --force to overwrite it or choose another --output");
  if (p.has_parent_path()) {
    fs::create_directories(p.parent_path(), ec);
    if (ec)
      throw std::runtime_error("cannot create the directory '" + p.parent_path().string() +
                               "' for output file '" + path + "': " + ec.message());
  }
  const std::string target =
      exists ? (p.parent_path() / (".rb" + std::to_string(::getpid()) + ".h5.partial")).string()
             : path;
  if (target.size() > kMaxMpiioPath)
    throw std::runtime_error("output path '" + path + "' is too long for MPI-IO (" +
                             std::to_string(target.size()) + " characters" +
                             (exists ? " for its temporary name" : "") + "; Open MPI aborts "
                             "above about 245): use a shorter --output, e.g. a relative path");
  const int fd = ::open(target.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error(
        errno == EEXIST
            ? "output file '" + path + "' appeared while this run was starting (another run "
              "with the same --output?); choose another --output"
            : "cannot create output file '" + target + "': " + std::strerror(errno));
  const bool wrote = ::write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  const int write_errno = errno;
  ::close(fd);
  if (!wrote) {
    ::unlink(target.c_str());
    throw std::runtime_error("cannot write output file '" + target + "': " + std::strerror(write_errno));
  }
  return target;
}

// "" when this rank reads rank 0's claim token from `target`, else why not. A rank on another
// node whose --output directory is node-local (/tmp, local scratch) finds no file or another
// run's; MPI-IO would then write one rank's data to each node's disk without an error.
std::string check_same_file(const std::string& path, const std::string& target,
                            const std::string& token, int rank, const std::string& host0) {
  std::string seen(token.size(), '\0');
  const int fd = ::open(target.c_str(), O_RDONLY | O_CLOEXEC);
  std::string why;
  if (fd < 0) {
    why = std::strerror(errno);
  } else {
    const ssize_t n = ::read(fd, seen.data(), seen.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(token.size()) || seen != token)
      why = "it holds another run's or another node's file";
  }
  if (why.empty()) return "";
  return "rank " + std::to_string(rank) + " (host " + this_host() + ") does not see the output "
         "file '" + path + "' that rank 0 (host " + host0 + ") created (" + why + "): every rank "
         "must see one file, so --output must be on a file system all nodes share, not /tmp or "
         "node-local scratch";
}

}  // namespace

File File::create(const std::string& path, MPI_Comm comm, bool force, const std::string& protect,
                  const IoHints& hints) {
  silence_hdf5();
  // Rank 0 alone looks at the file system (ranks on other nodes might see a stale view);
  // its verdict, as a message, is everyone's, and so is the name to create.
  std::string error, target, token, host0;
  const int rank = mpi::rank_of(comm);
  if (rank == 0) {
    try {
      host0 = this_host();
      token = claim_token(host0);
      target = claim_output(path, force, protect, token);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  mpi::broadcast_string(error, comm);
  if (!error.empty()) throw std::runtime_error(error);
  mpi::broadcast_string(target, comm);
  mpi::broadcast_string(token, comm);
  mpi::broadcast_string(host0, comm);
  File f;
  // Agreed at each step: a rank that cannot go on must not leave the others inside HDF5's
  // collective create; the first rank's reason is everyone's.
  const auto agree = [&](const std::string& mine) {
    const std::vector<std::string> errors = mpi::gather_strings(mine, comm);
    const auto bad = std::find_if(errors.begin(), errors.end(), [](const auto& e) { return !e.empty(); });
    if (bad == errors.end()) return;
    f.file_.reset();
    if (rank == 0) ::unlink(target.c_str());
    throw std::runtime_error(*bad);
  };
  agree(check_same_file(path, target, token, rank, host0));
  try {
    Id fapl = parallel_fapl(comm, target, hints);
    f.file_ = shared(check_id(H5Fcreate(target.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, *fapl),
                              "H5Fcreate", path),
                     H5Fclose);
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree(error);
  f.comm_ = comm;
  f.path_ = path;
  if (target != path) f.pending_ = target;
  written_file() = target;
  written_end() = 0;
  io_failed() = false;
  return f;
}

std::vector<std::pair<std::string, std::string>> File::mpiio_hints_in_effect() const {
  std::vector<std::pair<std::string, std::string>> hints;
  if (!file_) return hints;
  void* handle = nullptr;
  Id fapl(check_id(H5Fget_access_plist(file_->id()), "H5Fget_access_plist", path_), H5Pclose);
  if (H5Fget_vfd_handle(file_->id(), *fapl, &handle) < 0 || handle == nullptr) return hints;
  MPI_Info got = MPI_INFO_NULL;
  if (MPI_File_get_info(*static_cast<MPI_File*>(handle), &got) != MPI_SUCCESS) return hints;
  const MpiInfo owned(got);
  const MPI_Info info = owned.get();
  int n = 0;
  MPI_Info_get_nkeys(info, &n);
  for (int i = 0; i < n; ++i) {
    char key[MPI_MAX_INFO_KEY + 1] = {};
    MPI_Info_get_nthkey(info, i, key);
    int len = 0, found = 0;
    MPI_Info_get_valuelen(info, key, &len, &found);
    if (!found) continue;
    std::string value(static_cast<std::size_t>(len) + 1, '\0');
    MPI_Info_get(info, key, len + 1, value.data(), &found);
    value.resize(static_cast<std::size_t>(len));
    hints.emplace_back(key, value);
  }
  return hints;
}

File File::open_read(const std::string& path, MPI_Comm comm) {
  silence_hdf5();
  Id fapl = parallel_fapl(comm, path);
  File f;
  f.file_ = shared(check_id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, *fapl), "H5Fopen", path), H5Fclose);
  f.comm_ = comm;
  f.path_ = path;
  return f;
}

File::~File() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; close() explicitly to see errors.
  }
}

File::File(File&& o) noexcept
    : file_(std::move(o.file_)), comm_(o.comm_), path_(std::move(o.path_)),
      pending_(std::move(o.pending_)) {
  o.comm_ = MPI_COMM_NULL;
  o.pending_.clear();
}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    try {
      close();
    } catch (...) {
    }
    file_ = std::move(o.file_);
    comm_ = o.comm_;
    path_ = std::move(o.path_);
    pending_ = std::move(o.pending_);
    o.comm_ = MPI_COMM_NULL;
    o.pending_.clear();
  }
  return *this;
}

Group File::root() {
  if (!file_) throw std::runtime_error("HDF5 file '" + path_ + "' is not open");
  const hid_t g = check_id(H5Gopen2(file_->id(), "/", H5P_DEFAULT), "H5Gopen2", path_ + ":/");
  return Group(shared(g, H5Gclose), comm_, "/");
}

namespace {

// HDF5 cannot take back a metadata write that fails on one rank during a flush: its internal
// collectives go out of step (one rank in a barrier, another in the truncate's broadcast) and
// every rank waits forever (seen with 24-56 KiB left on a tmpfs). So a flush starts only with
// room for its metadata; otherwise the run stops here, every rank agreeing, with the reason.
constexpr unsigned long long kFlushReserve = 64ull << 10;

void check_room_for_flush(const std::string& path) {
  unsigned long long free_bytes = 0;
  std::string dir;
  if (!output_free_bytes(free_bytes, dir) || free_bytes >= kFlushReserve) return;
  throw std::runtime_error("HDF5 file '" + path + "' cannot be flushed: No space left on device (" +
                           std::to_string(free_bytes) + " bytes free on the file system of '" +
                           dir + "'; a flush needs " + std::to_string(kFlushReserve) +
                           " for its metadata)");
}

}  // namespace

void File::flush() {
  if (!file_) throw std::runtime_error("HDF5 file '" + path_ + "' is not open");
  agreed(comm_, [&] {
    check_room_for_flush(path_);
    check(H5Fflush(file_->id(), H5F_SCOPE_GLOBAL), "H5Fflush", path_);
    check_on_disk();
  });
  if (!pending_.empty()) replace_old();
}

// Open MPI's two-phase collective writes (fcoll vulcan) can lose a write error: the write
// "succeeds" and the data is missing (seen here with the file size limit at 4 ranks). After a
// flush the file must reach the end of every dataset written (collective_write notes it), so a
// file shorter on disk lost data: said here, with the OS's reason, instead of a sweep marked
// complete that cannot be read.
void File::check_on_disk() const {
  const std::uint64_t end = written_end();
  struct stat st {};
  const std::string& on_disk = pending_.empty() ? path_ : pending_;
  if (end == 0 || ::stat(on_disk.c_str(), &st) != 0) return;
  if (static_cast<std::uint64_t>(st.st_size) >= end) return;
  const std::string os = os_reason();
  throw std::runtime_error("HDF5 file '" + path_ + "' is " + std::to_string(st.st_size) +
                           " bytes on disk but its datasets reach byte " + std::to_string(end) +
                           ": the file system did not take the rest" +
                           (os.empty() ? "" : " (" + os + ")"));
}

// --force: the old file (or link) gives way only now that the new one holds its first flushed
// data, in one rename(2): a run that dies before leaves the old file whole, and a link is
// replaced itself, never its target. Collective.
void File::replace_old() {
  std::string error;
  MPI_Barrier(comm_);  // every rank's part of the flush is done
  if (mpi::rank_of(comm_) == 0 && ::rename(pending_.c_str(), path_.c_str()) != 0)
    error = "cannot move the new output file '" + pending_ + "' over '" + path_ + "': " +
            std::strerror(errno);
  mpi::broadcast_string(error, comm_);
  if (error.empty()) written_file() = path_;
  pending_.clear();
  if (!error.empty()) throw std::runtime_error(error);
}

void File::close() {
  if (!file_) return;
  if (io_failed()) {  // what the last good flush wrote stays readable; H5Fclose could hang
    file_->abandon();
    file_.reset();
    return;
  }
  if (!pending_.empty()) flush();
  auto h = std::move(file_);
  file_.reset();
  check(h->reset(), "H5Fclose", path_);
}

// ---------------------------------------------------------------------------------------
// Serial read helpers

std::vector<double> read_doubles(const std::string& file, const std::string& dataset,
                                 std::vector<std::uint64_t>* dims) {
  return read_numeric<double>(file, dataset, dims);
}

std::vector<std::int64_t> read_ints(const std::string& file, const std::string& dataset,
                                    std::vector<std::uint64_t>* dims) {
  return read_numeric<std::int64_t>(file, dataset, dims);
}

std::vector<std::string> read_strings(const std::string& file, const std::string& dataset) {
  auto f = open_serial(file);
  const std::string what = file + ":" + dataset;
  Id d(check_id(H5Dopen2(f->id(), dataset.c_str(), H5P_DEFAULT), "H5Dopen2", what), H5Dclose);
  Id type(check_id(H5Dget_type(*d), "H5Dget_type", what), H5Tclose);
  if (H5Tget_class(*type) != H5T_STRING)
    throw std::runtime_error("dataset '" + what + "' does not hold strings");
  Id space(check_id(H5Dget_space(*d), "H5Dget_space", what), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(*space);
  check(static_cast<herr_t>(n < 0 ? -1 : 0), "H5Sget_simple_extent_npoints", what);
  return read_string_values(*type, static_cast<std::size_t>(n), what, [&](hid_t mem, void* buf) {
    return H5Dread(*d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  });
}

std::uint64_t dataset_offset(const std::string& file, const std::string& dataset) {
  auto f = open_serial(file);
  const std::string what = file + ":" + dataset;
  Id d(check_id(H5Dopen2(f->id(), dataset.c_str(), H5P_DEFAULT), "H5Dopen2", what), H5Dclose);
  const haddr_t at = H5Dget_offset(*d);
  if (at == HADDR_UNDEF)
    throw std::runtime_error("dataset '" + what + "' has no single offset (chunked or empty)");
  return static_cast<std::uint64_t>(at);
}

namespace {

// An attribute opened for a serial read, with its type and the text that names it in errors.
struct OpenAttr {
  std::shared_ptr<Handle> file;
  std::string what;
  Id attr, type;
  OpenAttr(const std::string& path, const std::string& object, const std::string& name)
      : file(open_serial(path)),
        what(path + ":" + object + "@" + name),
        attr(check_id(H5Aopen_by_name(file->id(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                      "H5Aopen_by_name", what),
             H5Aclose),
        type(check_id(H5Aget_type(*attr), "H5Aget_type", what), H5Tclose) {}
};

}  // namespace

std::string read_string_attr(const std::string& file, const std::string& object, const std::string& attr) {
  OpenAttr o(file, object, attr);
  const std::string& what = o.what;
  Id& a = o.attr;
  if (H5Tget_class(*o.type) != H5T_STRING)
    throw std::runtime_error("attribute '" + what + "' is not a string");
  Id space(check_id(H5Aget_space(*a), "H5Aget_space", what), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(*space);
  if (n != 1) throw std::runtime_error("attribute '" + what + "' is not a scalar string");
  return read_string_values(*o.type, 1, what, [&](hid_t mem, void* buf) { return H5Aread(*a, mem, buf); })[0];
}

namespace {

template <class T>
std::vector<T> read_numeric_attr(const std::string& file, const std::string& object, const std::string& attr) {
  OpenAttr o(file, object, attr);
  const std::string& what = o.what;
  Id& a = o.attr;
  const H5T_class_t cls = H5Tget_class(*o.type);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    throw std::runtime_error("attribute '" + what + "' is not numeric");
  Id space(check_id(H5Aget_space(*a), "H5Aget_space", what), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(*space);
  check(static_cast<herr_t>(n < 0 ? -1 : 0), "H5Sget_simple_extent_npoints", what);
  std::vector<T> out(static_cast<std::size_t>(n));
  if (n > 0) check(H5Aread(*a, h5_type<T>(), out.data()), "H5Aread", what);
  return out;
}

}  // namespace

std::vector<std::int64_t> read_int_attr(const std::string& file, const std::string& object,
                                        const std::string& attr) {
  return read_numeric_attr<std::int64_t>(file, object, attr);
}

std::vector<double> read_double_attr(const std::string& file, const std::string& object,
                                     const std::string& attr) {
  return read_numeric_attr<double>(file, object, attr);
}

std::string library_version() {
  unsigned major = 0, minor = 0, release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace rb::h5
