#pragma once
// The MPI transports' one error path: a failed call becomes std::runtime_error naming the
// transport, the call and MPI's own text (the sweep turns it into a failed run).
#include <mpi.h>

#include <stdexcept>
#include <string>

namespace rb::ring {

inline void throw_if_mpi_error(int rc, const char* who, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(who) + ": " + call +
                           " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

}  // namespace rb::ring
