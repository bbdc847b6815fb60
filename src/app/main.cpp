// ringbench: SPMD entry point. The command line is parsed first, so --help, --version and
// usage errors are ringbench's own; then Kokkos starts with the --kokkos-* options, and the
// driver (src/app/driver.cpp) runs. MPI and Kokkos live for the whole run.
#include <Kokkos_Core.hpp>
#include <cstdio>

#include <fmt/format.h>

#include "app/cli.hpp"
#include "app/driver.hpp"
#include "app/provenance.hpp"
#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"

int main(int argc, char** argv) {
  rb::MpiEnvironment mpi(argc, argv);
  const rb::ParsedCommandLine parsed = rb::parse_command_line(argc, argv);
  if (parsed.exit_code >= 0) {
    if (rb::mpi::rank_of(MPI_COMM_WORLD) == 0) {
      const std::string text = parsed.show_version ? rb::version_text() : parsed.message;
      fmt::print(parsed.exit_code == 0 ? stdout : stderr, "{}", text);
    }
    return parsed.exit_code;
  }
  std::vector<char*> kokkos_argv{argv[0]};
  std::vector<std::string> kokkos_args = parsed.cli.kokkos_args;
  for (auto& a : kokkos_args) kokkos_argv.push_back(a.data());
  int kokkos_argc = static_cast<int>(kokkos_argv.size());
  kokkos_argv.push_back(nullptr);
  int code = 0;
  {
    Kokkos::ScopeGuard kokkos(kokkos_argc, kokkos_argv.data());
    code = rb::run_ringbench(parsed.cli, mpi.thread_level());
  }
  return code;
}
