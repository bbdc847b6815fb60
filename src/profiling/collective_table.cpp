#include "profiling/collective_table.hpp"

#include <climits>
#include <stdexcept>

#include "dtype.hpp"
#include "profiling/nccl_calls.hpp"
#include "runtime/mpi.hpp"

namespace rb::coll {
namespace {

char* at(void* base, std::size_t offset) {
  return static_cast<char*>(base) + offset;
}

// ---- byte counts (nccl-tests' setupArgs / GetCollByteCount) ---------------------------------
// Every rank sends and receives `count` elements.
Sizes whole(std::size_t count, std::size_t elem, int) {
  Sizes s;
  s.count = count;
  s.send_bytes = s.recv_bytes = count * elem;
  return s;
}
// all_gather: count per rank; each rank receives n of them.
Sizes gathered(std::size_t count, std::size_t elem, int n) {
  Sizes s;
  s.count = count / static_cast<std::size_t>(n);
  s.send_bytes = s.count * elem;
  s.recv_bytes = s.count * static_cast<std::size_t>(n) * elem;
  s.send_inplace_offset = s.count * elem;
  return s;
}
// reduce_scatter: count per rank of the result; each rank reduces n of them.
Sizes scattered(std::size_t count, std::size_t elem, int n) {
  Sizes s;
  s.count = count / static_cast<std::size_t>(n);
  s.send_bytes = s.count * static_cast<std::size_t>(n) * elem;
  s.recv_bytes = s.count * elem;
  s.recv_inplace_offset = s.count * elem;
  return s;
}
// all_to_all: count per peer.
Sizes per_peer(std::size_t count, std::size_t elem, int n) {
  Sizes s;
  s.count = count / static_cast<std::size_t>(n);
  s.send_bytes = s.recv_bytes = s.count * static_cast<std::size_t>(n) * elem;
  return s;
}

// ---- bus-bandwidth factors for a group of n ranks (nccl-tests' GetBw, n >= 1) --------------
// busbw is the bandwidth each rank's slowest link must sustain for the operation to take the
// measured time under the optimal (ring / pairwise) algorithm, so that it can be compared with
// the hardware's link bandwidth (nccl-tests doc/PERFORMANCE.md):
//  - all_reduce: a ring reduce-scatter followed by a ring all-gather; each moves (n-1)/n of
//    the buffer through every rank's link, so 2(n-1)/n of the S bytes cross each link.
//  - all_gather, reduce_scatter: one of those two phases: (n-1)/n of the total S bytes
//    (S = the gathered / the scattered-from size) cross each link.
//  - all_to_all: every rank keeps 1/n of its S bytes and sends the other (n-1)/n.
//  - broadcast, reduce: a pipelined chain moves all S bytes once through every link: 1.
//  - send/recv (ring neighbour exchange): one message over one link: 1.
double two_phases(int n) {
  return 2.0 * (n - 1.0) / n;
}
double one_phase(int n) {
  return (n - 1.0) / n;
}
double once(int) {
  return 1.0;
}

// ---- where input and output lie -------------------------------------------------------------
void same_buffer(const Call& c, Transport, Regions& r) {  // all_reduce, sendrecv
  r.input = c.in_place ? c.recv : c.send;
  r.input_count = c.sizes.count;
  r.output_count = c.sizes.count;
}
void gather_regions(const Call& c, Transport, Regions& r) {
  r.input = c.in_place ? at(c.recv, static_cast<std::size_t>(c.rank) * c.sizes.send_inplace_offset)
                       : c.send;
  r.input_count = c.sizes.count;
  r.output_count = c.sizes.count * static_cast<std::size_t>(c.nranks);
}
void scatter_regions(const Call& c, Transport t, Regions& r) {
  const std::size_t w = c.sizes.recv_inplace_offset;  // one rank's block, bytes
  r.input = c.in_place ? c.recv : c.send;
  r.input_count = c.sizes.count * static_cast<std::size_t>(c.nranks);
  // MPI leaves the in-place result at the start of the buffer, NCCL at rank * count.
  r.output = (c.in_place && t == Transport::Nccl) ? at(c.recv, static_cast<std::size_t>(c.rank) * w)
                                                  : c.recv;
  r.output_count = c.sizes.count;
  r.zero_bytes = c.in_place ? c.sizes.send_bytes : c.sizes.recv_bytes;
}
void all_to_all_regions(const Call& c, Transport, Regions& r) {
  r.input = c.send;
  r.input_count = c.sizes.count * static_cast<std::size_t>(c.nranks);
  r.output_count = r.input_count;
}
void broadcast_regions(const Call& c, Transport t, Regions& r) {
  same_buffer(c, t, r);
  // MPI out of place: the root's data never leaves its send buffer; nothing to check there.
  if (!c.in_place && t == Transport::Mpi && c.rank == c.root) r.output_count = 0;
}
void reduce_regions(const Call& c, Transport t, Regions& r) {
  same_buffer(c, t, r);
  if (c.rank != c.root) r.output_count = 0;
}

// ---- the MPI calls --------------------------------------------------------------------------
// fp32 sums of 16-bit floats for MPI, which has no such types: each element is widened,
// added and rounded back (what NCCL does for half and bfloat16 sums, up to rounding order).
void sum_f16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = attn::float_to_half(attn::half_to_float(a[i]) + attn::half_to_float(b[i]));
}
void sum_bf16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = attn::float_to_bf16(attn::bf16_to_float(a[i]) + attn::bf16_to_float(b[i]));
}

// A user-defined MPI_Op, created on first use and freed at exit unless MPI is already gone.
class UserOp {
 public:
  explicit UserOp(MPI_User_function* f) { RB_MPI_CHECK(MPI_Op_create(f, 1, &op_)); }
  ~UserOp() {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Op_free(&op_);
  }
  UserOp(const UserOp&) = delete;
  UserOp& operator=(const UserOp&) = delete;
  MPI_Op get() const { return op_; }

 private:
  MPI_Op op_ = MPI_OP_NULL;
};

MPI_Op mpi_sum(prof::DType t) {
  if (t == prof::DType::F16) {
    static UserOp op(sum_f16);
    return op.get();
  }
  if (t == prof::DType::BF16) {
    static UserOp op(sum_bf16);
    return op.get();
  }
  return MPI_SUM;
}

int mpi_count(const Call& c) {
  if (c.sizes.count > static_cast<std::size_t>(INT_MAX))
    throw std::runtime_error("MPI count " + std::to_string(c.sizes.count) + " exceeds INT_MAX");
  return static_cast<int>(c.sizes.count);
}

void mpi_all_reduce(const Call& c, MPI_Comm comm) {
  RB_MPI_CHECK(MPI_Allreduce(c.in_place ? MPI_IN_PLACE : c.send, c.recv, mpi_count(c),
                             mpi_datatype(c.dtype), mpi_sum(c.dtype), comm));
}
void mpi_all_gather(const Call& c, MPI_Comm comm) {
  const MPI_Datatype t = mpi_datatype(c.dtype);
  RB_MPI_CHECK(MPI_Allgather(c.in_place ? MPI_IN_PLACE : c.send, mpi_count(c), t, c.recv,
                             mpi_count(c), t, comm));
}
void mpi_reduce_scatter(const Call& c, MPI_Comm comm) {
  RB_MPI_CHECK(MPI_Reduce_scatter_block(c.in_place ? MPI_IN_PLACE : c.send, c.recv, mpi_count(c),
                                        mpi_datatype(c.dtype), mpi_sum(c.dtype), comm));
}
void mpi_all_to_all(const Call& c, MPI_Comm comm) {
  const MPI_Datatype t = mpi_datatype(c.dtype);
  RB_MPI_CHECK(MPI_Alltoall(c.send, mpi_count(c), t, c.recv, mpi_count(c), t, comm));
}
void mpi_broadcast(const Call& c, MPI_Comm comm) {
  // MPI's broadcast is in place by nature; out of place the root sends from its send buffer.
  void* buf = (!c.in_place && c.rank == c.root) ? c.send : c.recv;
  RB_MPI_CHECK(MPI_Bcast(buf, mpi_count(c), mpi_datatype(c.dtype), c.root, comm));
}
void mpi_reduce(const Call& c, MPI_Comm comm) {
  // The receive buffer only matters at the root; elsewhere pass none so nothing aliases.
  const bool root = c.rank == c.root;
  const void* send = c.in_place ? (root ? MPI_IN_PLACE : c.recv) : c.send;
  RB_MPI_CHECK(MPI_Reduce(send, root ? c.recv : nullptr, mpi_count(c), mpi_datatype(c.dtype),
                          mpi_sum(c.dtype), c.root, comm));
}
void mpi_sendrecv(const Call& c, MPI_Comm comm) {
  const MPI_Datatype t = mpi_datatype(c.dtype);
  const int next = (c.rank + 1) % c.nranks, prev = (c.rank - 1 + c.nranks) % c.nranks;
  RB_MPI_CHECK(MPI_Sendrecv(c.send, mpi_count(c), t, next, 41, c.recv, mpi_count(c), t, prev, 41,
                            comm, MPI_STATUS_IGNORE));
}

}  // namespace

const std::vector<Collective>& collectives() {
  using prof::Pattern;
  // op, name, in place, byte counts, busbw factor, expected output, regions, MPI, NCCL
  static const std::vector<Collective> table = {
      {Op::AllReduce, "all_reduce", true, whole, two_phases, Pattern::SumOfInputs, same_buffer,
       mpi_all_reduce, nccl::all_reduce},
      {Op::AllGather, "all_gather", true, gathered, one_phase, Pattern::GatheredInputs,
       gather_regions, mpi_all_gather, nccl::all_gather},
      {Op::ReduceScatter, "reduce_scatter", true, scattered, one_phase, Pattern::SumOfOwnBlock,
       scatter_regions, mpi_reduce_scatter, nccl::reduce_scatter},
      {Op::AllToAll, "all_to_all", false, per_peer, one_phase, Pattern::TransposedBlocks,
       all_to_all_regions, mpi_all_to_all, nccl::all_to_all},
      {Op::Broadcast, "broadcast", true, whole, once, Pattern::RootInput, broadcast_regions,
       mpi_broadcast, nccl::broadcast},
      {Op::Reduce, "reduce", true, whole, once, Pattern::SumOfInputs, reduce_regions, mpi_reduce,
       nccl::reduce},
      // The ring neighbour exchange ring attention uses: send to rank+1, receive from rank-1.
      {Op::SendRecv, "sendrecv", false, whole, once, Pattern::PreviousRankInput, same_buffer,
       mpi_sendrecv, nccl::sendrecv},
  };
  return table;
}

const Collective& collective(Op op) {
  for (const auto& c : collectives())
    if (c.op == op) return c;
  throw std::logic_error("collective table: no row for operation " +
                         std::to_string(static_cast<int>(op)));
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto& c : collectives()) names.push_back(c.name);
  return names;
}

const char* op_name(Op op) {
  return collective(op).name;
}

Op op_from_name(const std::string& name) {
  for (const auto& c : collectives())
    if (name == c.name) return c.op;
  throw std::invalid_argument("unknown collective operation '" + name + "'");
}

const char* transport_name(Transport t) {
  return t == Transport::Mpi ? "mpi" : "nccl";
}

Sizes sizes_for(Op op, std::size_t requested_bytes, std::size_t elem, int n) {
  Sizes s = collective(op).sizes(requested_bytes / elem, elem, n);
  s.bytes = s.send_bytes > s.recv_bytes ? s.send_bytes : s.recv_bytes;
  return s;
}

Call call_for(Op op, prof::DType t, bool in_place, std::size_t requested_bytes, int rank,
              int nranks, int root) {
  Call c;
  c.op = op;
  c.dtype = t;
  c.in_place = in_place;
  c.sizes = sizes_for(op, requested_bytes, prof::dtype_size(t), nranks);
  c.rank = rank;
  c.nranks = nranks;
  c.root = root;
  return c;
}

Regions regions(const Call& c, Transport t) {
  const Collective& row = collective(c.op);
  Regions r;
  r.expect.pattern = row.expect;
  r.expect.rank = c.rank;
  r.expect.nranks = c.nranks;
  r.expect.root = c.root;
  r.expect.count = c.sizes.count;
  r.output = c.recv;
  r.zero = c.recv;
  r.zero_bytes = c.sizes.recv_bytes;
  row.regions(c, t, r);
  return r;
}

std::size_t count_mismatches_host(const Regions& r, prof::DType t) {
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < r.output_count; ++j)
    if (!prof::matches(t, prof::load(r.output, j, t), prof::expected_value(r.expect, j),
                       r.expect.nranks))
      ++wrong;
  return wrong;
}

MPI_Datatype mpi_datatype(prof::DType t) {
  switch (t) {
    case prof::DType::F32:
      return MPI_FLOAT;
    case prof::DType::F64:
      return MPI_DOUBLE;
    case prof::DType::F16:
    case prof::DType::BF16:
      return MPI_UINT16_T;
    case prof::DType::I32:
      return MPI_INT32_T;
  }
  return MPI_FLOAT;
}

}  // namespace rb::coll
