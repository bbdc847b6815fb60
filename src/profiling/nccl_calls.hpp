#pragma once
// The NCCL call of each collective (the calls nccl-tests makes, src/<op>.cu RunColl), enqueued
// on `cuda_stream` (cudaStream_t) over `nccl_comm` (ncclComm_t) with device buffers. No CUDA
// or NCCL types here, so the collective table names them in every build: nccl_calls.cpp
// defines them in CUDA builds, nccl_calls_absent.cpp (they throw) in the others.
#include "profiling/collective_table.hpp"

namespace rb::coll::nccl {

void all_reduce(const Call& c, void* nccl_comm, void* cuda_stream);
void all_gather(const Call& c, void* nccl_comm, void* cuda_stream);
void reduce_scatter(const Call& c, void* nccl_comm, void* cuda_stream);
void all_to_all(const Call& c, void* nccl_comm, void* cuda_stream);
void broadcast(const Call& c, void* nccl_comm, void* cuda_stream);
void reduce(const Call& c, void* nccl_comm, void* cuda_stream);
void sendrecv(const Call& c, void* nccl_comm, void* cuda_stream);

}  // namespace rb::coll::nccl
