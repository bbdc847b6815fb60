#pragma once
// The run's end state beside the output, OUTPUT.end, for the ends that cannot write it into the
// HDF5 file: a signal (SIGTERM, SIGINT, SIGUSR1) or the hang guard's time limit. /run's status
// is written collectively by every rank, and then the ranks are anywhere, often inside a
// collective that will never complete (a hang), with the launcher's SIGKILL a second (mpirun)
// to 30 s (Slurm's KillWait) away, and only the main thread may call MPI. So the watch thread
// of the first rank that ends the run this way writes a few lines of text, in the names of
// /run's attributes:
//
//   status: interrupted                     (or timeout)
//   failure: SIGTERM during sweep S point P (LABEL)
//   end_time: 2026-11-24T02:13:45Z
//   rank: R
//
// while /run keeps status 'running' and every sweep finished before stays complete. The file is
// made with O_CREAT | O_EXCL | O_NOFOLLOW: the first rank's record stands, and nothing is written
// through a link planted there. A run's start removes the one an earlier run on the same output
// left (remove_end_record), so a record always belongs to the file beside it.
#include <string>

namespace rb {

// OUTPUT.end for OUTPUT.
std::string end_record_path(const std::string& output);

// The record's text (exposed for tests).
std::string end_record_text(const std::string& status, const std::string& failure, int rank);

// Creates `path` with the record; false when it exists already (another rank wrote it first),
// or cannot be made (a link, no room, no permission). Plain system calls: no allocation once the
// text is made, callable from the watch thread whatever the main thread is doing.
bool write_end_record(const std::string& path, const std::string& text);

// "" when `path` is nothing or a regular file (an earlier run's record, removed now), else why
// the run refuses to start: a link, a directory, a FIFO ... at the name is someone else's.
std::string remove_end_record(const std::string& path);

}  // namespace rb
