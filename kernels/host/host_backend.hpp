#pragma once
// The Kokkos host attention backend (default execution space): the host kernel path.
#include <memory>

#include "backend.hpp"

namespace rb::attn {

std::unique_ptr<AttentionBackend> make_host_backend();

}  // namespace rb::attn
