#pragma once
// The `collectives` sweep: NCCL collectives on GPU buffers (backend cuda) or MPI collectives
// on host buffers (backend host), over message sizes, dtypes, in-place and out-of-place, in
// concurrent rank groups, timed like nccl-tests; plus the alpha-beta cost model fitted to
// the results. docs/sweeps/collectives.md describes the keys and the datasets.
#include <cstddef>
#include <memory>

#include <mpi.h>

#include "cuda/profiling/pattern.hpp"
#include "profiling/busbw.hpp"
#include "sweeps/sweep.hpp"

namespace rb {

std::unique_ptr<Sweep> parse_collectives(const SweepSpec& spec, const ParseContext& ctx);

namespace coll {

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
enum class Transport { Mpi, Nccl };
const char* transport_name(Transport t);
Regions regions(const Call& c, Transport t);

// The MPI path: runs the call over `comm` on host buffers (reductions are sums; 16-bit float
// sums use a user-defined MPI_Op that adds in fp32 and rounds back).
void run_mpi(const Call& c, MPI_Comm comm);
MPI_Datatype mpi_datatype(prof::DType t);

#ifdef RINGBENCH_HAVE_CUDA
// The NCCL path: enqueues the call on `cuda_stream` (cudaStream_t) over `nccl_comm`
// (ncclComm_t), with device buffers; the calls nccl-tests makes.
void run_nccl(const Call& c, void* nccl_comm, void* cuda_stream);
#endif

// Host-side check: the number of output elements that differ from the expectation.
std::size_t count_mismatches_host(const Regions& r, prof::DType t);

}  // namespace coll
}  // namespace rb
