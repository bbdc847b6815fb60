#include "app/agreed_errors.hpp"

#include <fmt/format.h>

#include "runtime/mpi_util.hpp"

namespace rb {

bool first_error_reported(const std::string& error, const char* prefix, MPI_Comm world) {
  if (!mpi::any_rank(!error.empty(), world)) return false;
  if (mpi::first_rank_with(!error.empty(), world) == mpi::rank_of(world))
    fmt::print(stderr, "ringbench: {}{}\n", prefix, error);
  return true;
}

bool rank_errors_reported(const std::string& error, MPI_Comm world) {
  if (!error.empty()) fmt::print(stderr, "ringbench: rank {}: {}\n", mpi::rank_of(world), error);
  return mpi::any_rank(!error.empty(), world);
}

}  // namespace rb
