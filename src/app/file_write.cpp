#include "app/file_write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "config/file_kind.hpp"

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

std::string refusal_to_replace(const std::string& path, bool replace_link, const std::string& what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "";  // nothing there (or the write will say why)
  if (S_ISREG(st.st_mode) || (replace_link && S_ISLNK(st.st_mode))) return "";
  return what + " '" + path + "' is " + cfg::file_kind(st.st_mode) + "; ringbench replaces only " +
         (replace_link ? "a regular file or a link there (never a FIFO, device, socket or directory)"
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
    error = "cannot write the " + what + " '" + path + "' (through '" + temp + "'): " + std::strerror(why);
  if (error.empty()) error = refusal_to_replace(path, replace_link, what);  // taken meanwhile?
  if (error.empty() && ::rename(temp.c_str(), path.c_str()) != 0)
    error = "cannot rename '" + temp + "' to the " + what + " '" + path + "': " + std::strerror(errno);
  if (error.empty()) return;
  ::unlink(temp.c_str());
  throw std::runtime_error(error);
}

}  // namespace rb
