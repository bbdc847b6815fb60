// ringbench: SPMD entry point. MPI and Kokkos live for the whole run; everything else is
// in the driver (src/sweeps/driver.cpp).
#include <Kokkos_Core.hpp>

#include "runtime/mpi.hpp"
#include "app/driver.hpp"

int main(int argc, char** argv) {
  rb::MpiEnvironment mpi(argc, argv);
  int code = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    code = rb::run_ringbench(argc, argv, mpi.thread_level());
  }
  return code;
}
