// The output file: claiming its path (one run gets it, a node that does not share the file
// system is named), creating it for parallel HDF5 with the run's MPI-IO hints, flushing with
// room for the metadata, checking what reached the disk, replacing an old file under --force
// only once the new one is closed whole, and closing (or abandoning one whose I/O failed).
#include "metrics/h5.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "config/file_kind.hpp"
#include "metrics/h5_detail.hpp"
#include "metrics/partial_name.hpp"

namespace rb::h5 {
using namespace detail;

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
    check(H5Pset_alignment(*fapl, hints.alignment_bytes, hints.alignment_bytes), "H5Pset_alignment",
          path);
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
  return "ringbench output claim: host " + host + " pid " + std::to_string(::getpid()) + " t " +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "\n";
}

// --force replaces a regular file or a link (the link itself, never its target); a FIFO, a
// device or a socket at the path is not ringbench's to replace (renamed over, a device node
// would become a plain file). "" or the refusal, before the claim and again before the rename.
std::string not_replaceable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) return "";
  return "output '" + path + "' is " + cfg::file_kind(st.st_mode) +
         ", not a regular file; "
         "ringbench writes a new file, or with --force replaces only a regular file or a link, "
         "never a FIFO, device or socket: choose another --output";
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
  if (const std::string refused = exists ? not_replaceable(path) : ""; !refused.empty())
    throw std::runtime_error(refused);
  if (exists && fs::is_symlink(st) && !force)
    throw std::runtime_error("output '" + path + "' is a symbolic link (to '" +
                             fs::read_symlink(p, ec).string() +
                             "'); ringbench does not write "
                             "through links: choose another --output, or pass --force to "
                             "replace the link itself (never its target)");
  if (exists && !force)
    throw std::runtime_error(
        "output file '" + path +
        "' already exists; pass --force to overwrite it or choose another --output");
  if (p.has_parent_path()) {
    fs::create_directories(p.parent_path(), ec);
    if (ec)
      throw std::runtime_error("cannot create the directory '" + p.parent_path().string() +
                               "' for output file '" + path + "': " + ec.message());
  }
  const std::string target =
      exists ? (p.parent_path() / partial_name(p.filename().string(), ::getpid())).string() : path;
  if (target.size() > kMaxMpiioPath)
    throw std::runtime_error("output path '" + path + "' is too long for MPI-IO (" +
                             std::to_string(target.size()) + " characters" +
                             (exists ? " for its temporary name" : "") +
                             "; Open MPI aborts "
                             "above about 245): use a shorter --output, e.g. a relative path");
  const int fd = ::open(target.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error(
        errno == EEXIST ? "output file '" + path +
                              "' appeared while this run was starting (another run "
                              "with the same --output?); choose another --output"
                        : "cannot create output file '" + target + "': " + std::strerror(errno));
  const bool wrote = ::write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  const int write_errno = errno;
  ::close(fd);
  if (!wrote) {
    ::unlink(target.c_str());
    throw std::runtime_error("cannot write output file '" + target +
                             "': " + std::strerror(write_errno));
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
  return "rank " + std::to_string(rank) + " (host " + this_host() +
         ") does not see the output "
         "file '" +
         path + "' that rank 0 (host " + host0 + ") created (" + why +
         "): every rank "
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
    const auto bad =
        std::find_if(errors.begin(), errors.end(), [](const auto& e) { return !e.empty(); });
    if (bad == errors.end()) return;
    f.file_.reset();
    if (rank == 0) ::unlink(target.c_str());
    throw std::runtime_error(*bad);
  };
  agree(check_same_file(path, target, token, rank, host0));
  try {
    Id fapl = parallel_fapl(comm, target, hints);
    f.file_ = shared(
        check_id(H5Fcreate(target.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, *fapl), "H5Fcreate", path),
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
  f.file_ =
      shared(check_id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, *fapl), "H5Fopen", path), H5Fclose);
  f.comm_ = comm;
  f.path_ = path;
  return f;
}

File::~File() {
  try {
    close_file(false);
  } catch (...) {
    // A destructor must not throw; close() explicitly to see errors.
  }
}

File::File(File&& o) noexcept
    : file_(std::move(o.file_)),
      comm_(o.comm_),
      path_(std::move(o.path_)),
      pending_(std::move(o.pending_)) {
  o.comm_ = MPI_COMM_NULL;
  o.pending_.clear();
}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    try {
      close_file(false);
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

// --force: the old file (or link) gives way only now that the new one is whole (the run reached
// its end and closed it), in one rename(2): a run that stops before (a full disk, a signal, the
// hang guard, a kill) leaves the old file as it was, and a link is replaced itself, never its
// target. Collective.
void File::replace_old() {
  std::string error;
  MPI_Barrier(comm_);  // every rank's part of the flush is done
  if (mpi::rank_of(comm_) == 0) {
    error = not_replaceable(path_);  // something else may have taken the path since the claim
    if (!error.empty())
      error += " (it appeared after the run started; the new file stays as '" + pending_ + "')";
    else if (::rename(pending_.c_str(), path_.c_str()) != 0)
      error = "cannot move the new output file '" + pending_ + "' over '" + path_ +
              "': " + std::strerror(errno);
  }
  mpi::broadcast_string(error, comm_);
  if (error.empty()) written_file() = path_;
  pending_.clear();
  if (!error.empty()) throw std::runtime_error(error);
}

void File::close(bool replace_old_file) {
  close_file(replace_old_file);
}

// `replace`: close() at the run's end renames a --force run's file over the old one; the
// destructor (a File dropped on an error path) does not, so the old file stays and the new one
// is left under its temporary name for the next run on the output to remove.
void File::close_file(bool replace) {
  if (!file_) return;
  if (io_failed()) {  // what the last good flush wrote stays readable; H5Fclose could hang
    file_->abandon();
    file_.reset();
    return;
  }
  if (!pending_.empty() && replace) flush();
  auto h = std::move(file_);
  file_.reset();
  check(h->reset(), "H5Fclose", path_);
  if (!pending_.empty() && replace) replace_old();
}

}  // namespace rb::h5
