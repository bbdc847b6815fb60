#include "profiling/nccl_calls.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include "runtime/cuda_check.hpp"

namespace rb::coll::nccl {
namespace {

ncclDataType_t datatype(prof::DType t) {
  switch (t) {
    case prof::DType::F32:
      return ncclFloat32;
    case prof::DType::F64:
      return ncclFloat64;
    case prof::DType::F16:
      return ncclFloat16;
    case prof::DType::BF16:
      return ncclBfloat16;
    case prof::DType::I32:
      return ncclInt32;
  }
  return ncclFloat32;
}

ncclComm_t as_comm(void* c) {
  return static_cast<ncclComm_t>(c);
}
cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}
char* at(void* base, std::size_t offset) {
  return static_cast<char*>(base) + offset;
}

}  // namespace

void all_reduce(const Call& c, void* comm, void* stream) {
  RB_NCCL_CHECK(ncclAllReduce(c.in_place ? c.recv : c.send, c.recv, c.sizes.count,
                              datatype(c.dtype), ncclSum, as_comm(comm), as_stream(stream)));
}
void all_gather(const Call& c, void* comm, void* stream) {
  const void* send =
      c.in_place ? at(c.recv, static_cast<std::size_t>(c.rank) * c.sizes.send_inplace_offset)
                 : c.send;
  RB_NCCL_CHECK(ncclAllGather(send, c.recv, c.sizes.count, datatype(c.dtype), as_comm(comm),
                              as_stream(stream)));
}
void reduce_scatter(const Call& c, void* comm, void* stream) {
  void* recv = c.in_place
                   ? at(c.recv, static_cast<std::size_t>(c.rank) * c.sizes.recv_inplace_offset)
                   : c.recv;
  RB_NCCL_CHECK(ncclReduceScatter(c.in_place ? c.recv : c.send, recv, c.sizes.count,
                                  datatype(c.dtype), ncclSum, as_comm(comm), as_stream(stream)));
}
void all_to_all(const Call& c, void* comm, void* stream) {
  const std::size_t block = c.sizes.count * prof::dtype_size(c.dtype);
  RB_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < c.nranks; ++r) {
    const std::size_t off = static_cast<std::size_t>(r) * block;
    RB_NCCL_CHECK(ncclSend(at(c.send, off), c.sizes.count, datatype(c.dtype), r, as_comm(comm),
                           as_stream(stream)));
    RB_NCCL_CHECK(ncclRecv(at(c.recv, off), c.sizes.count, datatype(c.dtype), r, as_comm(comm),
                           as_stream(stream)));
  }
  RB_NCCL_CHECK(ncclGroupEnd());
}
void broadcast(const Call& c, void* comm, void* stream) {
  RB_NCCL_CHECK(ncclBroadcast(c.in_place ? c.recv : c.send, c.recv, c.sizes.count,
                              datatype(c.dtype), c.root, as_comm(comm), as_stream(stream)));
}
void reduce(const Call& c, void* comm, void* stream) {
  RB_NCCL_CHECK(ncclReduce(c.in_place ? c.recv : c.send, c.recv, c.sizes.count, datatype(c.dtype),
                           ncclSum, c.root, as_comm(comm), as_stream(stream)));
}
void sendrecv(const Call& c, void* comm, void* stream) {
  const int next = (c.rank + 1) % c.nranks, prev = (c.rank - 1 + c.nranks) % c.nranks;
  RB_NCCL_CHECK(ncclGroupStart());
  RB_NCCL_CHECK(
      ncclSend(c.send, c.sizes.count, datatype(c.dtype), next, as_comm(comm), as_stream(stream)));
  RB_NCCL_CHECK(
      ncclRecv(c.recv, c.sizes.count, datatype(c.dtype), prev, as_comm(comm), as_stream(stream)));
  RB_NCCL_CHECK(ncclGroupEnd());
}

}  // namespace rb::coll::nccl
