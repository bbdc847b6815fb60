// The HDF5 writer's shared internals (h5_detail.hpp): error checks, the output file's state,
// string types and spaces.
#include "metrics/h5_detail.hpp"

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <system_error>

namespace rb::h5::detail {
namespace {

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

}  // namespace

// HDF5 prints its error stack to stderr by default; we report errors as exceptions instead.
void silence_hdf5() {
  static const bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

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
  free_bytes =
      static_cast<unsigned long long>(vfs.f_bavail) * static_cast<unsigned long long>(vfs.f_frsize);
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

}  // namespace rb::h5::detail
