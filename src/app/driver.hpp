#pragma once
// The common driver: command line, config validation (before any collective work), binding,
// the output file, and running each sweep in order. SPMD: every rank calls run_ringbench.
#include <string>
#include <vector>

namespace rb {

struct CommandLine {
  std::string config_path;
  std::string output;               // --output FILE.h5 (empty: <output_dir>/<run.name>_<UTC>.h5)
  std::vector<std::string> only;    // --only SWEEP[,SWEEP]
  bool dry_run = false;
  bool force = false;
  bool help = false;
  bool version = false;
  std::string error;                // non-empty: usage error
};

CommandLine parse_command_line(const std::vector<std::string>& args);
std::string usage_text();

// Returns the process exit code (the same on every rank): 0 complete, 1 failed run or
// invalid config, 2 usage error. Needs MPI and Kokkos initialised.
int run_ringbench(int argc, char** argv, int mpi_thread_level);

}  // namespace rb
