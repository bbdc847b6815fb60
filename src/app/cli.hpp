#pragma once
// The command line (CLI11), parsed before Kokkos starts so that --help and usage errors are
// ringbench's own; --kokkos-* options are set aside for Kokkos::initialize.
#include <string>
#include <vector>

#include "runtime/mpi.hpp"

namespace rb {

struct CommandLine {
  std::string config_path;
  std::string output;             // --output FILE.h5 (empty: <output_dir>/<run.name>_<UTC>.h5)
  std::vector<std::string> only;  // --only SWEEP[,SWEEP]
  bool dry_run = false;
  bool force = false;
  bool quiet = false;         // --quiet: errors, warnings and the final line only
  bool verbose = false;       // --verbose: --dry-run lists every point
  bool wide = false;          // --wide: tables one line a row, however wide
  std::string json;           // --json FILE (- : stdout): one record per point (docs/user-guide.md)
  int world_size = 0;         // --world-size N: plan a --dry-run for N ranks, no launcher
  std::string estimate_from;  // --estimate-from FILE.h5: measured times for the estimate
  double timeout_s = 0;       // --timeout SECONDS: the whole run's limit (0: run.timeout_s)
  // --ranks-per-node K [--placement block|cyclic]; inactive: the environment's
  // (RINGBENCH_RANKS_PER_NODE, RINGBENCH_PLACEMENT), else the real node layout.
  SimulatedNodes simulated;
  std::vector<std::string> kokkos_args;  // every --kokkos-* option, in order, for Kokkos
  std::string command_line;              // argv joined by spaces, recorded on /run
};

// What parsing decided: run with `cli`, or stop at once with `exit_code` after printing
// `message` (to stdout for --help/--version, to stderr for usage errors).
struct ParsedCommandLine {
  CommandLine cli;
  int exit_code = -1;         // -1: go on and run; 0: --help/--version; 2: usage error
  bool show_version = false;  // --version: the caller prints version_text() (needs MPI only)
  std::string message;
};

// Never throws for bad input: usage errors come back as exit code 2 with the message.
ParsedCommandLine parse_command_line(int argc, const char* const* argv);
// The full --help text; starts with "usage: ringbench".
std::string usage_text();

}  // namespace rb
