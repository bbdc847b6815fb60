// ringbench: SPMD entry point. The command line is parsed first, so --help, --version and
// usage errors are ringbench's own; then the environment is checked and Kokkos starts with the
// --kokkos-* options, and the driver (src/app/driver.cpp) runs. MPI and Kokkos live for the
// whole run.
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/cli.hpp"
#include "app/driver.hpp"
#include "app/environment.hpp"
#include "app/provenance.hpp"
#include "app/std_streams.hpp"
#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"

namespace {

// Kokkos::initialize throws on what check_environment cannot see (a --kokkos-threads option
// that contradicts KOKKOS_NUM_THREADS): said once, and every rank exits 1, not std::terminate.
// True on every rank when Kokkos started on every rank (finalize it at the end).
bool kokkos_started(std::vector<std::string> args, char* argv0) {
  std::vector<char*> argv{argv0};
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  argv.push_back(nullptr);
  std::string error;
  try {
    Kokkos::initialize(argc, argv.data());
  } catch (const std::exception& e) {
    error = e.what();
    error = error.substr(0, error.find('\n'));  // Kokkos adds "Traceback functionality ..."
  }
  const MPI_Comm world = MPI_COMM_WORLD;
  if (!rb::mpi::any_rank(!error.empty(), world)) return true;
  if (error.empty()) Kokkos::finalize();  // started here, not everywhere
  if (rb::mpi::first_rank_with(!error.empty(), world) == rb::mpi::rank_of(world))
    fmt::print(stderr, "ringbench: Kokkos could not start: {}\n", error);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  rb::keep_running_without_readers();
  rb::MpiEnvironment mpi(argc, argv);
  const rb::ParsedCommandLine parsed = rb::parse_command_line(argc, argv);
  if (parsed.exit_code >= 0) {
    if (rb::mpi::rank_of(MPI_COMM_WORLD) == 0) {
      const std::string text = parsed.show_version ? rb::version_text() : parsed.message;
      fmt::print(parsed.exit_code == 0 ? stdout : stderr, "{}", text);
    }
    return parsed.exit_code;
  }
  if (!rb::environment_ok(MPI_COMM_WORLD)) return 1;
  if (!kokkos_started(parsed.cli.kokkos_args, argv[0])) return 1;
  const int code = rb::run_ringbench(parsed.cli, mpi.thread_level());
  Kokkos::finalize();
  return code;
}
