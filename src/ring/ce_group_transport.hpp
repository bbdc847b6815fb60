#pragma once
// The copy-engine GroupTransport (CUDA builds): Ulysses' all-to-alls (overlapped per head
// group, or one-shot) by the copy engines through CUDA IPC, all-gather and reduce-scatter by
// `collectives` (NCCL). Every rank of the group pulls from every other, so every pair of GPUs needs
// peer access (one NVLink / NVSwitch node). The protocol is in ce_group_transport.cpp.
#include <memory>

#include <mpi.h>

#include "ring/group_transport.hpp"

namespace rb::ring {

// Collective over group_comm (each rank on its current CUDA device).
std::unique_ptr<GroupTransport> make_copy_engine_group_transport(
    MPI_Comm group_comm, attn::AttentionBackend& backend,
    std::unique_ptr<GroupTransport> collectives);

}  // namespace rb::ring
