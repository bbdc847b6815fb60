#pragma once
// What a path is, in words for messages: the config reader refuses what is not a regular file,
// and the writers of the output, --json and heartbeat files replace only a regular file (a FIFO
// or device renamed over would be gone, and a write through a link lands in its target).
// Header-only: each layer that checks a path includes it, none links another for it.
#include <sys/stat.h>

#include <cerrno>
#include <string>

namespace rb::cfg {

inline const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// What is at `path` itself (a link is not followed): "" when nothing is, else file_kind's words.
inline std::string kind_at(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? "" : "unreadable";
  return file_kind(st.st_mode);
}

}  // namespace rb::cfg
