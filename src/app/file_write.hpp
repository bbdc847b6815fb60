#pragma once
// Files ringbench writes beside its output (--json, the hang guard's heartbeat, the output's
// lock): the first two are written under a
// new name in the same directory (mkstemp: O_CREAT | O_EXCL, so never through a planted link
// and never over another file), then renamed over the path. Only nothing, a regular file or
// (when allowed) a symbolic link at the path is replaced: a FIFO, a device, a socket or a
// directory there is someone else's and stays as it is.
#include <string>
#include <vector>

namespace rb {

// "" when `path` may be replaced (nothing there, a regular file, or a link when `replace_link`),
// else why not, naming the path and what it is.
std::string refusal_to_replace(const std::string& path, bool replace_link, const std::string& what);

// Writes `text` to `path` as above (mode 0644); throws std::runtime_error naming the path and
// the OS's reason. `what` names the file in messages ("--json file").
void write_file_replacing(const std::string& path, const std::string& text, bool replace_link,
                          const std::string& what);

// The output's claim for the whole run: an advisory lock (flock) on OUTPUT.lock beside it, held
// by rank 0 from before the output is claimed until the run returns. A second run on the same
// output, with or without --force, is refused while the first is alive; the kernel releases
// the lock when the process ends however it ends, so a killed run blocks nothing (its lock
// file stays, unlocked). A lock file, not the output: HDF5 and MPI-IO open the output
// themselves, and their own fcntl locks (and NFS, which maps flock to fcntl) would share it.
class OutputLock {
 public:
  // Takes the lock, or throws std::runtime_error naming the output, the lock file and the
  // holder (host and pid it wrote). On a file system without locks, holds nothing.
  explicit OutputLock(const std::string& output);
  // Removes the lock file while still holding it, then releases it; then the directories the
  // constructor made for the output, if they are empty (a run refused before it wrote its file
  // leaves nothing behind).
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string output_, path_;
  int fd_ = -1;
  void take();
  std::vector<std::string> made_dirs_;  // outermost first
};

// Makes the missing directories above `file`, each mode 0755 (less what the umask takes), never
// more: under umask 000 an output directory is not made world-writable. Returns the ones it made,
// outermost first; one it cannot make is left to the caller's open to report.
std::vector<std::string> make_parent_dirs(const std::string& file);

}  // namespace rb
