#pragma once
// The Kokkos host attention backend (default execution space): the host kernel path.
#include <memory>

#include "backend.hpp"
#include "kernel_paths.hpp"

namespace rb::attn {

// The kokkos row.
std::unique_ptr<AttentionBackend> make_host_backend();
// The host row `choice` names ("auto": the host's headline row); a name that is not a host
// row, or a tile the row lacks, is std::invalid_argument (config parsing refuses them first).
std::unique_ptr<AttentionBackend> make_host_backend(const KernelChoice& choice);

}  // namespace rb::attn
