#include "app/file_write.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "config/file_kind.hpp"
#include "metrics/partial_name.hpp"

namespace rb {
namespace {

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// All of `text` to `fd`; false with errno set on a failed write.
bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::string refusal_to_replace(const std::string& path, bool replace_link,
                               const std::string& what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "";  // nothing there (or the write will say why)
  if (S_ISREG(st.st_mode) || (replace_link && S_ISLNK(st.st_mode))) return "";
  return what + " '" + path + "' is " + cfg::file_kind(st.st_mode) + "; ringbench replaces only " +
         (replace_link
              ? "a regular file or a link there (never a FIFO, device, socket or directory)"
              : "a regular file there (never a link, FIFO, device, socket or directory)") +
         ": remove it or choose another path";
}

void write_file_replacing(const std::string& path, const std::string& text, bool replace_link,
                          const std::string& what) {
  if (const std::string refused = refusal_to_replace(path, replace_link, what); !refused.empty())
    throw std::runtime_error(refused);
  // A dot name beside the target: same file system, so the rename is atomic.
  std::string temp = directory_of(path) + "/." + base_of(path) + ".XXXXXX";
  std::vector<char> name(temp.begin(), temp.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error("cannot create a temporary file beside the " + what + " '" + path +
                             "': " + std::strerror(errno));
  temp = name.data();
  bool ok = ::fchmod(fd, 0644) == 0 && write_all(fd, text);
  int why = errno;
  if (::close(fd) != 0 && ok) {  // NFS reports some write errors only here
    ok = false;
    why = errno;
  }
  std::string error;
  if (!ok)
    error = "cannot write the " + what + " '" + path + "' (through '" + temp +
            "'): " + std::strerror(why);
  if (error.empty()) error = refusal_to_replace(path, replace_link, what);  // taken meanwhile?
  if (error.empty() && ::rename(temp.c_str(), path.c_str()) != 0)
    error =
        "cannot rename '" + temp + "' to the " + what + " '" + path + "': " + std::strerror(errno);
  if (error.empty()) return;
  ::unlink(temp.c_str());
  throw std::runtime_error(error);
}

namespace {

constexpr const char* kHolder = "ringbench run: ";

// Who holds a lock file, from what its holder wrote: its own text only (a file planted at the
// name is not quoted).
std::string holder_of(int fd) {
  char buf[200] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  const std::string text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  const std::size_t start = std::strlen(kHolder), end = text.find('\n');
  if (text.rfind(kHolder, 0) != 0 || end == std::string::npos) return "holder unknown";
  return text.substr(start, end - start);
}

std::string this_holder() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(kHolder) + "host " + host + " pid " + std::to_string(::getpid()) + "\n";
}

}  // namespace

std::vector<std::string> make_parent_dirs(const std::string& file) {
  std::vector<std::string> missing;
  for (auto p = std::filesystem::path(file).parent_path(); !p.empty() && p != p.root_path();
       p = p.parent_path()) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0) break;
    missing.push_back(p.string());
  }
  std::vector<std::string> made;
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0755) != 0) break;
    made.push_back(*it);
  }
  return made;
}

namespace {

// Innermost first; rmdir removes only an empty directory: one that holds anything stays.
void remove_empty_dirs(const std::vector<std::string>& outermost_first) {
  for (auto it = outermost_first.rbegin(); it != outermost_first.rend(); ++it)
    if (::rmdir(it->c_str()) != 0) break;
}

// With the output's lock held, no live run writes a partial file of this output (a --force run
// holds the lock from before it makes one until it ends): those still there are left by --force
// runs killed before their end (a run that stops on an error or a signal removes its own). Only
// this user's regular files are removed; a link or anything else with such a name is left alone.
void remove_leftover_partials(const std::string& output) {
  namespace fs = std::filesystem;
  const fs::path out(output);
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const std::string prefix = h5::partial_prefix(out.filename().string());
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 8 ||
        name.compare(name.size() - 8, 8, ".partial") != 0)
      continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid())
      continue;
    if (::unlink(it->path().c_str()) == 0)
      std::fprintf(stderr,
                   "ringbench: removed '%s', left by an earlier --force run on '%s' that was "
                   "killed before its end\n",
                   it->path().c_str(), output.c_str());
  }
}

}  // namespace

OutputLock::OutputLock(const std::string& output) : output_(output), path_(output + ".lock") {
  // A directory that cannot be made is claim_output's message. Made here, before the output is
  // claimed: the lock file needs it.
  made_dirs_ = make_parent_dirs(output);
  try {
    take();
  } catch (...) {
    remove_empty_dirs(made_dirs_);
    throw;
  }
}

void OutputLock::take() {
  const auto fail = [&](const std::string& why) {
    throw std::runtime_error("cannot lock output '" + output_ + "' with '" + path_ + "': " + why);
  };
  // A run that ends removes its lock file: one opened just before that is a name no other run
  // finds any more, so the lock counts only on the file still at the path.
  for (int attempt = 0; attempt < 20; ++attempt) {
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      fail(std::string("it is ") + cfg::file_kind(st.st_mode) + ", not a lock file; remove it");
    const int fd =
        ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    // A folder that cannot take the file cannot take the output either: claim_output's
    // message (the documented one) says so.
    if (fd < 0 && (errno == EACCES || errno == EROFS || errno == ENOENT || errno == ENOTDIR))
      return;
    if (fd < 0) fail(std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      const std::string holder = holder_of(fd);
      ::close(fd);
      if (e == EWOULDBLOCK)
        throw std::runtime_error(
            "output '" + output_ + "' is in use by another ringbench run (" + holder +
            ", holding '" + path_ +
            "'); a second run on one output is refused, with or without "
            "--force, while the first is alive: wait for it to end or choose another --output");
      if (e == ENOLCK || e == ENOSYS || e == EOPNOTSUPP || e == EINVAL) return;  // no locks here
      fail(std::strerror(e));
    }
    struct stat held {
    }, now{};
    if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      fd_ = fd;
      remove_leftover_partials(output_);
      const std::string holder = this_holder();
      if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, holder.data(), holder.size(), 0) < 0) {
        // The lock holds without the holder's name: a refused run then says "holder unknown".
      }
      return;
    }
    ::close(fd);
  }
  fail("the lock file kept being replaced");
}

OutputLock::~OutputLock() {
  if (fd_ >= 0) {
    ::unlink(path_.c_str());
    ::close(fd_);
  }
  remove_empty_dirs(made_dirs_);
}

}  // namespace rb
