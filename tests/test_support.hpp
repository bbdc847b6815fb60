#pragma once
// Helpers every MPI doctest file needs: this rank, the world size, a scratch path that is the
// same on every rank, a folder of this process's own, and the message of an expected exception.
// Header-only; include after doctest. Adopt these instead of local copies.
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

namespace rb::test {

inline int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// A fresh path under $RINGBENCH_TEST_OUTPUT/<area> (CTest sets it; /tmp otherwise), the same on
// every rank (rank 0's pid), distinct per test and per concurrent CTest entry; any old file
// there is removed. Collective.
inline std::string test_path(const std::string& area, const std::string& name,
                             const std::string& extension = ".h5") {
  long id = static_cast<long>(getpid());
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const char* env = std::getenv("RINGBENCH_TEST_OUTPUT");
  const std::filesystem::path dir = std::filesystem::path(env && *env ? env : "/tmp") / area;
  const std::string file =
      "np" + std::to_string(world()) + "_" + std::to_string(id) + "_" + name + extension;
  const std::string path = (dir / file).string();
  if (rank() == 0) std::filesystem::remove(path);
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

// This process's folder for a test's scratch files, <temp>/ringbench-test-<area>-<pid> (made if
// missing); test_path is the one to share between ranks.
inline std::filesystem::path scratch_dir(const std::string& area) {
  auto dir = std::filesystem::temp_directory_path() /
             ("ringbench-test-" + area + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `f` and returns the exception's message, or "" when nothing was thrown.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace rb::test
