#pragma once
// Output to a reader that went away (`ringbench ... | head -1`, a closed terminal, a full disk
// under `> log`) must not end the run: the results go to the HDF5 file, the text is a view of
// them. By default the first write after the reader left killed the process (SIGPIPE, exit 141)
// with the output file left `running`; with SIGPIPE ignored the write fails with EPIPE instead,
// and {fmt} turns a failed write into an exception, thrown from the middle of a sweep.
namespace rb {

// Ignores SIGPIPE and replaces stdout and stderr by streams over the same descriptors that
// drop their text once a write fails (stdout says so once on stderr), so printing never fails
// and never throws. Call once, at the start of main, before any output.
void keep_running_without_readers();

}  // namespace rb
