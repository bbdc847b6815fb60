#pragma once
// The collective operations of the profiling sweeps, one row each: the name, how many bytes
// each rank sends and receives at a message size (as nccl-tests counts them, src/<op>.cu
// GetCollByteCount), the bus-bandwidth factor (GetBw) beside its derivation, what each output
// element must hold afterwards, where input and output lie in the buffers, and the MPI and NCCL
// calls. A new collective is one row in collective_table.cpp.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <mpi.h>

#include "cuda/profiling/pattern.hpp"

namespace rb::coll {

enum class Op { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv };
enum class Transport { Mpi, Nccl };
const char* transport_name(Transport t);

// Buffer sizes for one point, from the requested size S (bytes), the element size w and the
// group size n; count = S / w elements.
struct Sizes {
  std::size_t count = 0;                // the `count` argument passed to the collective call
  std::size_t send_bytes = 0;           // bytes each rank sends from (its input buffer)
  std::size_t recv_bytes = 0;           // bytes each rank receives into (its output buffer)
  std::size_t bytes = 0;                // the reported size: max(send, recv); algbw = bytes / time
  std::size_t send_inplace_offset = 0;  // in-place input = recv buffer + rank * this (NCCL layout)
  std::size_t recv_inplace_offset = 0;  // in-place output = recv buffer + rank * this (NCCL layout)
};

// One call of a collective on this rank, with buffers already offset for the iteration.
struct Call {
  Op op = Op::AllReduce;
  prof::DType dtype = prof::DType::F32;
  bool in_place = false;
  Sizes sizes;
  void* send = nullptr;  // send buffer (unused in place)
  void* recv = nullptr;  // receive buffer
  int rank = 0;          // in the group
  int nranks = 1;        // group size
  int root = 0;          // broadcast and reduce
};

// Where this rank's input lies (to fill with prof::input_value(rank, i)) and which output
// elements it must check after the call, for the transport's buffer layout (MPI's in-place
// reduce_scatter leaves the result at the start of the buffer, NCCL's at rank * count).
struct Regions {
  void* input = nullptr;
  std::size_t input_count = 0;
  void* output = nullptr;
  std::size_t output_count = 0;  // 0: nothing to check on this rank (e.g. reduce off the root)
  void* zero = nullptr;          // cleared before filling the input (the whole output side)
  std::size_t zero_bytes = 0;
  prof::Expectation expect;
};

struct Collective {
  Op op;
  const char* name;  // as written in the YAML and the HDF5 file
  // in place is defined (NCCL leaves all_to_all and send/recv undefined in place: the same
  // buffer would be read and written by different peers at once; nccl-tests skips them)
  bool in_place;
  Sizes (*sizes)(std::size_t count, std::size_t elem, int n);  // count = S / elem
  double (*busbw_factor)(int n);
  prof::Pattern expect;  // what output element j holds afterwards (pattern.hpp)
  void (*regions)(const Call& c, Transport t, Regions& r);  // input / output of this op
  void (*mpi)(const Call& c, MPI_Comm comm);
  void (*nccl)(const Call& c, void* nccl_comm, void* cuda_stream);  // nccl_calls.hpp
};

// Every collective, in the order the YAML lists them by default.
const std::vector<Collective>& collectives();
const Collective& collective(Op op);
// Names in table order, for the YAML's choices.
std::vector<std::string> op_names();
const char* op_name(Op op);
Op op_from_name(const std::string& name);  // throws std::invalid_argument

inline double busbw_factor(Op op, int n) {
  return collective(op).busbw_factor(n);
}
inline bool supports_in_place(Op op) {
  return collective(op).in_place;
}
Sizes sizes_for(Op op, std::size_t requested_bytes, std::size_t elem, int n);

// algbw = bytes / time; busbw = algbw * busbw_factor(op, n).
inline double algbw(std::size_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
}
inline double busbw(Op op, int n, std::size_t bytes, double seconds) {
  return algbw(bytes, seconds) * busbw_factor(op, n);
}

// The call of `op` at a requested message size for this rank of its group (buffers unset).
Call call_for(Op op, prof::DType t, bool in_place, std::size_t requested_bytes, int rank,
              int nranks, int root);
Regions regions(const Call& c, Transport t);
// The host-side check: the number of output elements that differ from the expectation.
std::size_t count_mismatches_host(const Regions& r, prof::DType t);
MPI_Datatype mpi_datatype(prof::DType t);

}  // namespace rb::coll
