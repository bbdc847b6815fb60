#include "app/end_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "app/file_write.hpp"

namespace rb {

std::string end_record_path(const std::string& output) {
  return output + ".end";
}

std::string end_record_text(const std::string& status, const std::string& failure, int rank) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  // One line per value: a newline inside one would start a field of its own.
  std::string one_line = failure;
  for (char& c : one_line)
    if (c == '\n' || c == '\r') c = ' ';
  return "status: " + status + "\nfailure: " + one_line + "\nend_time: " + when +
         "\nrank: " + std::to_string(rank) + "\n";
}

bool write_end_record(const std::string& path, const std::string& text) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::fsync(fd);  // the launcher's SIGKILL may follow at once
  ::close(fd);
  return done == text.size();
}

std::string remove_end_record(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "";
  if (S_ISREG(st.st_mode)) {
    if (::unlink(path.c_str()) == 0 || errno == ENOENT) return "";
    return "cannot remove the end record '" + path +
           "' an earlier run left: " + std::string(std::strerror(errno)) +
           "; remove it or choose another --output";
  }
  return refusal_to_replace(path, false, "end record");
}

}  // namespace rb
