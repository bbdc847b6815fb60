// For the standalone nvcc build of the GPU tests only (launch/bench_kernels.sh --tests), which
// links no host backend: the OutOfMemory constructor the full build takes from
// kernels/host/host_backend.cpp, with the same message.
#include <string>

#include "ring/interfaces.hpp"

namespace rb::ring {
OutOfMemory::OutOfMemory(std::size_t requested, std::size_t free_bytes, const std::string& where)
    : std::runtime_error(where + ": out of memory allocating " + std::to_string(requested) +
                         " B (" + std::to_string(free_bytes) + " B free)"),
      requested_(requested),
      free_(free_bytes) {}
}  // namespace rb::ring
