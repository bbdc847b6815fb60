#include "sweeps/collectives.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <tuple>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "profiling/cost_model.hpp"
#include "profiling/groups.hpp"
#include "profiling/timing.hpp"

#ifdef RINGBENCH_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda/profiling/profiling_cuda.hpp"
#include "runtime/cuda_check.hpp"
#endif

namespace rb {
namespace coll {

const char* transport_name(Transport t) { return t == Transport::Mpi ? "mpi" : "nccl"; }

namespace {

char* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

// fp32 sums of 16-bit floats for MPI, which has no such types: each element is widened,
// added and rounded back (what NCCL does for half and bfloat16 sums, up to rounding order).
void sum_f16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = prof::float_to_half(prof::half_to_float(a[i]) + prof::half_to_float(b[i]));
}
void sum_bf16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = prof::float_to_bf16(prof::bf16_to_float(a[i]) + prof::bf16_to_float(b[i]));
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

int as_int_count(std::size_t count) {
  if (count > static_cast<std::size_t>(INT_MAX))
    throw std::runtime_error("MPI count " + std::to_string(count) + " exceeds INT_MAX");
  return static_cast<int>(count);
}

// ---- one function per operation: the MPI path --------------------------------------------
void mpi_all_reduce(const Call& c, MPI_Comm comm) {
  const MPI_Datatype t = mpi_datatype(c.dtype);
  RB_MPI_CHECK(MPI_Allreduce(c.in_place ? MPI_IN_PLACE : c.send, c.recv, as_int_count(c.sizes.count),
                             t, mpi_sum(c.dtype), comm));
}
void mpi_all_gather(const Call& c, MPI_Comm comm) {
  const MPI_Datatype t = mpi_datatype(c.dtype);
  const int n = as_int_count(c.sizes.count);
  RB_MPI_CHECK(MPI_Allgather(c.in_place ? MPI_IN_PLACE : c.send, n, t, c.recv, n, t, comm));
}
void mpi_reduce_scatter(const Call& c, MPI_Comm comm) {
  RB_MPI_CHECK(MPI_Reduce_scatter_block(c.in_place ? MPI_IN_PLACE : c.send, c.recv,
                                        as_int_count(c.sizes.count), mpi_datatype(c.dtype),
                                        mpi_sum(c.dtype), comm));
}
void mpi_all_to_all(const Call& c, MPI_Comm comm) {
  const MPI_Datatype t = mpi_datatype(c.dtype);
  const int n = as_int_count(c.sizes.count);
  RB_MPI_CHECK(MPI_Alltoall(c.send, n, t, c.recv, n, t, comm));
}
void mpi_broadcast(const Call& c, MPI_Comm comm) {
  // MPI's broadcast is in place by nature; out of place the root sends from its send buffer.
  void* buf = (!c.in_place && c.rank == c.root) ? c.send : c.recv;
  RB_MPI_CHECK(MPI_Bcast(buf, as_int_count(c.sizes.count), mpi_datatype(c.dtype), c.root, comm));
}
void mpi_reduce(const Call& c, MPI_Comm comm) {
  // The receive buffer only matters at the root; elsewhere pass none so nothing aliases.
  const bool root = c.rank == c.root;
  const void* send = c.in_place ? (root ? MPI_IN_PLACE : c.recv) : c.send;
  RB_MPI_CHECK(MPI_Reduce(send, root ? c.recv : nullptr, as_int_count(c.sizes.count),
                          mpi_datatype(c.dtype), mpi_sum(c.dtype), c.root, comm));
}
void mpi_sendrecv(const Call& c, MPI_Comm comm) {
  const MPI_Datatype t = mpi_datatype(c.dtype);
  const int n = as_int_count(c.sizes.count);
  const int next = (c.rank + 1) % c.nranks, prev = (c.rank - 1 + c.nranks) % c.nranks;
  RB_MPI_CHECK(MPI_Sendrecv(c.send, n, t, next, 41, c.recv, n, t, prev, 41, comm, MPI_STATUS_IGNORE));
}

#ifdef RINGBENCH_HAVE_CUDA
// ---- the NCCL path: the calls nccl-tests makes (src/<op>.cu RunColl) ----------------------
ncclDataType_t nccl_datatype(prof::DType t) {
  switch (t) {
    case prof::DType::F32: return ncclFloat32;
    case prof::DType::F64: return ncclFloat64;
    case prof::DType::F16: return ncclFloat16;
    case prof::DType::BF16: return ncclBfloat16;
    case prof::DType::I32: return ncclInt32;
  }
  return ncclFloat32;
}
struct NcclCall {
  const Call& c;
  ncclComm_t comm;
  cudaStream_t stream;
  std::size_t elem() const { return prof::dtype_size(c.dtype); }
};
void nccl_all_reduce(const NcclCall& n) {
  const Call& c = n.c;
  RB_NCCL_CHECK(ncclAllReduce(c.in_place ? c.recv : c.send, c.recv, c.sizes.count,
                              nccl_datatype(c.dtype), ncclSum, n.comm, n.stream));
}
void nccl_all_gather(const NcclCall& n) {
  const Call& c = n.c;
  const void* send = c.in_place ? at(c.recv, static_cast<std::size_t>(c.rank) * c.sizes.send_inplace_offset) : c.send;
  RB_NCCL_CHECK(ncclAllGather(send, c.recv, c.sizes.count, nccl_datatype(c.dtype), n.comm, n.stream));
}
void nccl_reduce_scatter(const NcclCall& n) {
  const Call& c = n.c;
  void* recv = c.in_place ? at(c.recv, static_cast<std::size_t>(c.rank) * c.sizes.recv_inplace_offset) : c.recv;
  RB_NCCL_CHECK(ncclReduceScatter(c.in_place ? c.recv : c.send, recv, c.sizes.count,
                                  nccl_datatype(c.dtype), ncclSum, n.comm, n.stream));
}
void nccl_all_to_all(const NcclCall& n) {
  const Call& c = n.c;
  const std::size_t block = c.sizes.count * n.elem();
  RB_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < c.nranks; ++r) {
    RB_NCCL_CHECK(ncclSend(at(c.send, r * block), c.sizes.count, nccl_datatype(c.dtype), r, n.comm, n.stream));
    RB_NCCL_CHECK(ncclRecv(at(c.recv, r * block), c.sizes.count, nccl_datatype(c.dtype), r, n.comm, n.stream));
  }
  RB_NCCL_CHECK(ncclGroupEnd());
}
void nccl_broadcast(const NcclCall& n) {
  const Call& c = n.c;
  RB_NCCL_CHECK(ncclBroadcast(c.in_place ? c.recv : c.send, c.recv, c.sizes.count,
                              nccl_datatype(c.dtype), c.root, n.comm, n.stream));
}
void nccl_reduce(const NcclCall& n) {
  const Call& c = n.c;
  RB_NCCL_CHECK(ncclReduce(c.in_place ? c.recv : c.send, c.recv, c.sizes.count,
                           nccl_datatype(c.dtype), ncclSum, c.root, n.comm, n.stream));
}
void nccl_sendrecv(const NcclCall& n) {
  const Call& c = n.c;
  const int next = (c.rank + 1) % c.nranks, prev = (c.rank - 1 + c.nranks) % c.nranks;
  RB_NCCL_CHECK(ncclGroupStart());
  RB_NCCL_CHECK(ncclSend(c.send, c.sizes.count, nccl_datatype(c.dtype), next, n.comm, n.stream));
  RB_NCCL_CHECK(ncclRecv(c.recv, c.sizes.count, nccl_datatype(c.dtype), prev, n.comm, n.stream));
  RB_NCCL_CHECK(ncclGroupEnd());
}
#endif

// The table of operations (as nccl-tests has one testColl per operation): the factor lives
// in busbw.hpp, the expected data in pattern.hpp (by the same Op order).
struct OpRow {
  Op op;
  void (*mpi)(const Call&, MPI_Comm);
#ifdef RINGBENCH_HAVE_CUDA
  void (*nccl)(const NcclCall&);
#endif
};

const OpRow& row(Op op) {
  static const std::vector<OpRow> table = {
#ifdef RINGBENCH_HAVE_CUDA
#define RB_ROW(op, m, n) {op, m, n}
#else
#define RB_ROW(op, m, n) {op, m}
#endif
      RB_ROW(Op::AllReduce, mpi_all_reduce, nccl_all_reduce),
      RB_ROW(Op::AllGather, mpi_all_gather, nccl_all_gather),
      RB_ROW(Op::ReduceScatter, mpi_reduce_scatter, nccl_reduce_scatter),
      RB_ROW(Op::AllToAll, mpi_all_to_all, nccl_all_to_all),
      RB_ROW(Op::Broadcast, mpi_broadcast, nccl_broadcast),
      RB_ROW(Op::Reduce, mpi_reduce, nccl_reduce),
      RB_ROW(Op::SendRecv, mpi_sendrecv, nccl_sendrecv),
#undef RB_ROW
  };
  return table.at(static_cast<std::size_t>(op));
}

}  // namespace

MPI_Datatype mpi_datatype(prof::DType t) {
  switch (t) {
    case prof::DType::F32: return MPI_FLOAT;
    case prof::DType::F64: return MPI_DOUBLE;
    case prof::DType::F16:
    case prof::DType::BF16: return MPI_UINT16_T;
    case prof::DType::I32: return MPI_INT32_T;
  }
  return MPI_FLOAT;
}

void run_mpi(const Call& c, MPI_Comm comm) { row(c.op).mpi(c, comm); }

#ifdef RINGBENCH_HAVE_CUDA
void run_nccl(const Call& c, void* nccl_comm, void* cuda_stream) {
  row(c.op).nccl(NcclCall{c, static_cast<ncclComm_t>(nccl_comm), static_cast<cudaStream_t>(cuda_stream)});
}
#endif

Regions regions(const Call& c, Transport t) {
  const std::size_t w = prof::dtype_size(c.dtype);
  const std::size_t cnt = c.sizes.count;
  const std::size_t n = static_cast<std::size_t>(c.nranks);
  const std::size_t rank = static_cast<std::size_t>(c.rank);
  Regions r;
  r.expect.op = static_cast<prof::CollCode>(c.op);
  r.expect.rank = c.rank;
  r.expect.nranks = c.nranks;
  r.expect.root = c.root;
  r.expect.count = cnt;
  r.zero = c.recv;
  r.zero_bytes = c.sizes.recv_bytes;
  switch (c.op) {
    case Op::AllReduce:
    case Op::SendRecv:
      r.input = c.in_place ? c.recv : c.send;
      r.input_count = cnt;
      r.output = c.recv;
      r.output_count = cnt;
      break;
    case Op::AllGather:
      r.input = c.in_place ? at(c.recv, rank * cnt * w) : c.send;
      r.input_count = cnt;
      r.output = c.recv;
      r.output_count = cnt * n;
      break;
    case Op::ReduceScatter:
      r.input = c.in_place ? c.recv : c.send;
      r.input_count = cnt * n;
      r.output = (c.in_place && t == Transport::Nccl) ? at(c.recv, rank * cnt * w) : c.recv;
      r.output_count = cnt;
      r.zero_bytes = c.in_place ? cnt * n * w : cnt * w;
      break;
    case Op::AllToAll:
      r.input = c.send;
      r.input_count = cnt * n;
      r.output = c.recv;
      r.output_count = cnt * n;
      break;
    case Op::Broadcast:
      r.input = c.in_place ? c.recv : c.send;
      r.input_count = cnt;
      r.output = c.recv;
      // MPI out of place: the root's data never leaves its send buffer; nothing to check there.
      r.output_count = (!c.in_place && t == Transport::Mpi && c.rank == c.root) ? 0 : cnt;
      break;
    case Op::Reduce:
      r.input = c.in_place ? c.recv : c.send;
      r.input_count = cnt;
      r.output = c.recv;
      r.output_count = c.rank == c.root ? cnt : 0;
      break;
  }
  return r;
}

std::size_t count_mismatches_host(const Regions& r, prof::DType t) {
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < r.output_count; ++j)
    if (!prof::matches(t, prof::load(r.output, j, t), prof::expected_value(r.expect, j), r.expect.nranks))
      ++wrong;
  return wrong;
}

}  // namespace coll

// ---- the sweep ------------------------------------------------------------------------------
namespace {

using coll::Op;
using coll::Transport;

struct CollParams {
  std::vector<Op> ops;
  std::vector<prof::DType> dtypes;
  std::vector<bool> in_place;
  std::vector<groups::Spec> groups;
  std::vector<std::uint64_t> sizes;  // requested message sizes, min_bytes * factor^k <= max_bytes
  std::uint64_t max_bytes = 0;
  std::int64_t warmup = 5;
  std::int64_t iterations = 20;
  bool check = true;
  int root = 0;
};

struct PointDef {
  Op op;
  std::size_t group;  // index into params.groups
  prof::DType dtype;
  std::uint64_t requested;
  bool in_place;
};

std::string size_text(std::uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    ++u;
  }
  return std::to_string(b) + " " + units[u];
}

std::string point_label(const CollParams& p, const PointDef& d) {
  return std::string(coll::op_name(d.op)) + " group " + p.groups[d.group].label() + " " +
         prof::dtype_name(d.dtype) + " " + size_text(d.requested) +
         (d.in_place ? " in-place" : " out-of-place");
}

// Per-point results of this rank, in point order.
struct Results {
  std::vector<double> rank_time, group_time, rank_algbw, rank_busbw, iter_time;
  std::vector<std::int64_t> group_id, group_size, group_rank, wrong, bytes, count;
  // shared (same on every rank)
  std::vector<double> time, algbw, busbw;
  std::vector<std::int64_t> wrong_total;
};

class Collectives final : public Sweep {
 public:
  Collectives(CollParams p, int world) : p_(std::move(p)), world_(world) {
    for (Op op : p_.ops)
      for (std::size_t g = 0; g < p_.groups.size(); ++g)
        for (prof::DType t : p_.dtypes)
          for (std::uint64_t s : p_.sizes)
            for (bool ip : p_.in_place)
              if (!ip || coll::supports_in_place(op)) points_.push_back({op, g, t, s, ip});
  }
  std::string type() const override { return "collectives"; }

  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    for (const auto& d : points_)
      lines.push_back(point_label(p_, d) + ", " + std::to_string(p_.warmup) + " warmup + " +
                      std::to_string(p_.iterations) + " timed iterations" +
                      (p_.check ? ", data checked" : ""));
    return lines;
  }

  std::uint64_t estimated_output_bytes() const override {
    // per point: iteration times and ~12 scalars per rank, ~16 shared values, the model's raw point
    return static_cast<std::uint64_t>(points_.size()) * 8u *
               (static_cast<std::uint64_t>(world_) * static_cast<std::uint64_t>(p_.iterations + 12) + 20u) +
           65536u;
  }

  SweepOutcome run(RunContext& ctx, h5::Group& out) override;

 private:
  CollParams p_;
  int world_;
  std::vector<PointDef> points_;
};

// The buffers and transport of one run; allocated once at the largest size.
struct Engine {
  Transport transport = Transport::Mpi;
  std::size_t alloc = 0;
  prof::HostBuffer host_send, host_recv;
#ifdef RINGBENCH_HAVE_CUDA
  prof::cuda::DeviceBuffer dev_send, dev_recv;
  std::unique_ptr<prof::cuda::Stream> stream;
  std::vector<NcclComm> nccl;        // one per group spec (index), empty slot for world
  std::vector<void*> nccl_raw;       // the ncclComm_t to use per group spec
#endif
  void* send() const {
#ifdef RINGBENCH_HAVE_CUDA
    if (transport == Transport::Nccl) return dev_send.get();
#endif
    return host_send.get();
  }
  void* recv() const {
#ifdef RINGBENCH_HAVE_CUDA
    if (transport == Transport::Nccl) return dev_recv.get();
#endif
    return host_recv.get();
  }

  // Launches (NCCL: enqueues on the stream; MPI: runs) the call with nccl-tests' per-iteration
  // buffer shift, which moves the buffers through the allocation to avoid cache effects.
  void launch(const coll::Call& base, std::size_t iter, std::size_t group_index, MPI_Comm comm) {
    coll::Call c = base;
    const std::size_t total = std::max(c.sizes.send_bytes, c.sizes.recv_bytes);
    const std::size_t steps = total ? alloc / total : 1;
    const std::size_t shift = total * (iter % (steps ? steps : 1));
    c.send = static_cast<char*>(c.send) + shift;
    c.recv = static_cast<char*>(c.recv) + shift;
#ifdef RINGBENCH_HAVE_CUDA
    if (transport == Transport::Nccl) {
      coll::run_nccl(c, nccl_raw[group_index], stream->get());
      return;
    }
#endif
    (void)group_index;
    coll::run_mpi(c, comm);
  }
  void sync() {
#ifdef RINGBENCH_HAVE_CUDA
    if (transport == Transport::Nccl) stream->synchronize();
#endif
  }
};

}  // namespace
}  // namespace rb

namespace rb {
namespace {

// Zeroes the output side and writes this rank's input, at the unshifted buffers.
void prepare(Engine& e, const coll::Call& c) {
  const coll::Regions r = coll::regions(c, e.transport);
#ifdef RINGBENCH_HAVE_CUDA
  if (e.transport == Transport::Nccl) {
    prof::cuda::fill_zero(r.zero, r.zero_bytes, e.stream->get());
    prof::cuda::fill_input(r.input, r.input_count, c.dtype, c.rank, e.stream->get());
    e.stream->synchronize();
    return;
  }
#endif
  std::memset(r.zero, 0, r.zero_bytes);
  for (std::size_t i = 0; i < r.input_count; ++i)
    prof::store(r.input, i, c.dtype, prof::input_value(c.rank, i));
}

std::int64_t check_output(Engine& e, const coll::Call& c) {
  const coll::Regions r = coll::regions(c, e.transport);
#ifdef RINGBENCH_HAVE_CUDA
  if (e.transport == Transport::Nccl)
    return static_cast<std::int64_t>(
        prof::cuda::count_mismatches(r.output, r.output_count, c.dtype, r.expect, e.stream->get()));
#endif
  return static_cast<std::int64_t>(coll::count_mismatches_host(r, c.dtype));
}

}  // namespace

SweepOutcome Collectives::run(RunContext& ctx, h5::Group& out) {
  const int world_rank = ctx.layout.rank;
  Engine e;
  e.transport = ctx.backend == Backend::Cuda ? Transport::Nccl : Transport::Mpi;
  e.alloc = std::max<std::size_t>(static_cast<std::size_t>(p_.max_bytes), 64);

  // Groups of every requested kind; each rank is in one group per kind.
  std::vector<groups::Group> gs;
  for (const auto& spec : p_.groups) gs.push_back(groups::make_group(spec, ctx.world, ctx.layout));

  if (e.transport == Transport::Mpi) {
    e.host_send = prof::HostBuffer(e.alloc);
    e.host_recv = prof::HostBuffer(e.alloc);
  } else {
#ifdef RINGBENCH_HAVE_CUDA
    if (!ctx.gpu) throw std::runtime_error("collectives: the cuda backend has no GPU context");
    e.dev_send = prof::cuda::DeviceBuffer(e.alloc);
    e.dev_recv = prof::cuda::DeviceBuffer(e.alloc);
    e.stream = std::make_unique<prof::cuda::Stream>();
    // The world group reuses the driver's communicator; the others get their own, built
    // from the group's MPI communicator (all groups of a kind initialise concurrently).
    e.nccl.reserve(gs.size());
    for (const auto& g : gs)
      e.nccl.push_back(g.spec.kind == groups::Kind::World ? NcclComm() : NcclComm(g.get()));
    for (std::size_t i = 0; i < gs.size(); ++i)
      e.nccl_raw.push_back(gs[i].spec.kind == groups::Kind::World ? ctx.gpu->world.raw()
                                                                  : e.nccl[i].raw());
#else
    throw std::runtime_error("collectives: the cuda backend needs a build with CUDA and NCCL");
#endif
  }

  const std::size_t P = points_.size();
  const std::size_t I = static_cast<std::size_t>(p_.iterations);
  Results R;
  R.iter_time.assign(P * I, 0.0);
  ProgressReporter& progress = ctx.progress;
  bool data_ok = true;
  std::string failure;
  for (std::size_t pi = 0; pi < P; ++pi) {
    const PointDef& d = points_[pi];
    const groups::Group& g = gs[d.group];
    progress.point_started(pi, point_label(p_, d));
    coll::Call c;
    c.op = d.op;
    c.dtype = d.dtype;
    c.in_place = d.in_place;
    c.sizes = coll::sizes_for(d.op, static_cast<std::size_t>(d.requested), prof::dtype_size(d.dtype), g.size);
    c.send = e.send();
    c.recv = e.recv();
    c.rank = g.rank;
    c.nranks = g.size;
    c.root = p_.root % g.size;

    prepare(e, c);
    for (std::int64_t w = 0; w < p_.warmup; ++w) e.launch(c, static_cast<std::size_t>(w), d.group, g.get());
    e.sync();

    // nccl-tests' timing: all ranks (all groups) start together after a barrier, launch the
    // iterations back to back, wait for the stream once; time = elapsed / iterations.
    RB_MPI_CHECK(MPI_Barrier(ctx.world));
    const double t0 = prof::now_s();
    for (std::size_t it = 0; it < I; ++it) e.launch(c, it, d.group, g.get());
    e.sync();
    const double batch = (prof::now_s() - t0) / static_cast<double>(I);

    // A second, separately timed loop for per-iteration times (device events on the GPU,
    // host clock around each blocking call on the host).
    RB_MPI_CHECK(MPI_Barrier(ctx.world));
    double* iters = &R.iter_time[pi * I];
#ifdef RINGBENCH_HAVE_CUDA
    if (e.transport == Transport::Nccl) {
      prof::cuda::EventTimeline tl(I + 1, e.stream->get());
      tl.mark(0);
      for (std::size_t it = 0; it < I; ++it) {
        e.launch(c, it, d.group, g.get());
        tl.mark(it + 1);
      }
      e.sync();
      for (std::size_t it = 0; it < I; ++it) iters[it] = tl.seconds(it, it + 1);
    }
#endif
    if (e.transport == Transport::Mpi) {
      for (std::size_t it = 0; it < I; ++it) {
        const double a = prof::now_s();
        e.launch(c, it, d.group, g.get());
        iters[it] = prof::now_s() - a;
      }
    }

    std::int64_t wrong = -1;
    if (p_.check) {
      prepare(e, c);
      e.launch(c, 0, d.group, g.get());
      e.sync();
      wrong = check_output(e, c);
    }

    // The slowest rank's time sets the bandwidth: per group (MPI_MAX over the group) for the
    // per-rank figures, and the slowest group for the shared ones.
    const double group_time = prof::allreduce_double(batch, MPI_MAX, g.get());
    const double world_time = prof::allreduce_double(batch, MPI_MAX, ctx.world);
    const double galg = coll::algbw(c.sizes.bytes, group_time);
    const double gbus = galg * coll::busbw_factor(d.op, g.size);
    std::int64_t wrong_sum = 0;
    RB_MPI_CHECK(MPI_Allreduce(&wrong, &wrong_sum, 1, MPI_INT64_T, MPI_SUM, ctx.world));
    if (!p_.check) wrong_sum = -1;
    if (wrong_sum > 0 && data_ok) {
      data_ok = false;
      failure = point_label(p_, d) + ": " + std::to_string(wrong_sum) +
                " wrong elements over all ranks (data check)";
    }
    R.rank_time.push_back(batch);
    R.group_time.push_back(group_time);
    R.rank_algbw.push_back(galg);
    R.rank_busbw.push_back(gbus);
    R.group_id.push_back(g.id);
    R.group_size.push_back(g.size);
    R.group_rank.push_back(g.rank);
    R.wrong.push_back(wrong);
    R.bytes.push_back(static_cast<std::int64_t>(c.sizes.bytes));
    R.count.push_back(static_cast<std::int64_t>(c.sizes.count));
    R.time.push_back(world_time);
    R.algbw.push_back(prof::allreduce_double(galg, MPI_MIN, ctx.world));
    R.busbw.push_back(prof::allreduce_double(gbus, MPI_MIN, ctx.world));
    R.wrong_total.push_back(wrong_sum);
  }

  // Shared sizes: the largest over ranks (groups of one kind can differ in size on uneven nodes).
  std::vector<std::int64_t> bytes_max(P), gsize_max(P);
  RB_MPI_CHECK(MPI_Allreduce(R.bytes.data(), bytes_max.data(), static_cast<int>(P), MPI_INT64_T, MPI_MAX, ctx.world));
  RB_MPI_CHECK(MPI_Allreduce(R.group_size.data(), gsize_max.data(), static_cast<int>(P), MPI_INT64_T, MPI_MAX, ctx.world));

  // ---- output ----
  std::vector<std::string> op_s, group_s, dtype_s;
  std::vector<std::int64_t> in_place_v, requested_v;
  for (const auto& d : points_) {
    op_s.push_back(coll::op_name(d.op));
    group_s.push_back(p_.groups[d.group].label());
    dtype_s.push_back(prof::dtype_name(d.dtype));
    in_place_v.push_back(d.in_place ? 1 : 0);
    requested_v.push_back(static_cast<std::int64_t>(d.requested));
  }
  out.attr("transport", coll::transport_name(e.transport));
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.attr("check", static_cast<std::int64_t>(p_.check ? 1 : 0));
  out.attr("root", static_cast<std::int64_t>(p_.root));
  out.attr("timing",
           "nccl-tests method: warmup, world barrier, `iterations` back-to-back calls, one "
           "stream sync; rank_time_s = elapsed / iterations; time_s = max over ranks. "
           "iteration_time_s comes from a second loop timed per call.");
  const std::vector<std::uint64_t> dp = {P};
  out.write_shared_strings("operation", op_s, {"1", "collective operation of each point"});
  out.write_shared_strings("group", group_s, {"1", "group kind: world, intra_node, inter_node or a group size"});
  out.write_shared_strings("dtype", dtype_s, {"1", "element type"});
  out.write_shared("in_place", in_place_v, dp, {"1", "1 when the operation ran in place"});
  out.write_shared("requested_bytes", requested_v, dp, {"B", "message size requested (min_bytes * factor^k)"});
  out.write_shared("bytes", bytes_max, dp, {"B", "size as nccl-tests reports it (max of send and receive bytes per rank); algbw = bytes / time"});
  out.write_shared("group_size", gsize_max, dp, {"1", "ranks per group (largest group)"});
  out.write_shared("time_s", R.time, dp, {"s", "time of one operation: the slowest rank's batch average"});
  out.write_shared("algbw_Bps", R.algbw, dp, {"B/s", "bytes / group time, of the slowest group"});
  out.write_shared("busbw_Bps", R.busbw, dp, {"B/s", "algbw x the nccl-tests bus factor, of the slowest group"});
  out.write_shared("wrong_elements", R.wrong_total, dp, {"1", "output elements that failed the data check, summed over ranks; -1 when not checked"});
  out.write_per_rank("rank_time_s", R.rank_time, dp, {"s", "this rank's batch average time per operation"});
  out.write_per_rank("group_time_s", R.group_time, dp, {"s", "slowest rank of this rank's group"});
  out.write_per_rank("rank_algbw_Bps", R.rank_algbw, dp, {"B/s", "bytes / group_time_s of this rank's group"});
  out.write_per_rank("rank_busbw_Bps", R.rank_busbw, dp, {"B/s", "rank_algbw_Bps x bus factor for this rank's group size"});
  out.write_per_rank("group_id", R.group_id, dp, {"1", "id of this rank's group (node index for intra_node, local rank for inter_node, block index for sizes, 0 for world)"});
  out.write_per_rank("rank_group_size", R.group_size, dp, {"1", "size of this rank's group"});
  out.write_per_rank("group_rank", R.group_rank, dp, {"1", "this rank's rank within its group"});
  out.write_per_rank("rank_bytes", R.bytes, dp, {"B", "reported size at this rank's group size"});
  out.write_per_rank("count", R.count, dp, {"1", "count argument of the call (elements; per rank / per peer for all_gather, reduce_scatter, all_to_all)"});
  out.write_per_rank("rank_wrong_elements", R.wrong, dp, {"1", "output elements of this rank that failed the data check; -1 when not checked"});
  out.write_per_rank("iteration_time_s", R.iter_time, {P, I}, {"s", "per-call time of each iteration of the second timed loop"});

  // ---- the alpha-beta model, one series per (operation, group, dtype, in_place) ----
  struct Series {
    std::size_t first_point;
    std::vector<std::size_t> points;
  };
  std::vector<Series> series;
  std::map<std::tuple<int, std::size_t, int, bool>, std::size_t> index;
  for (std::size_t pi = 0; pi < P; ++pi) {
    const auto& d = points_[pi];
    auto key = std::make_tuple(static_cast<int>(d.op), d.group, static_cast<int>(d.dtype), d.in_place);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, series.size()).first;
      series.push_back({pi, {}});
    }
    series[it->second].points.push_back(pi);
  }
  const std::size_t S = series.size();
  std::vector<std::string> m_op, m_group, m_transport, m_dtype;
  std::vector<std::int64_t> m_in_place, m_gsize, m_npoints, m_offset, raw_series;
  std::vector<double> m_alpha, m_beta, m_busbeta, m_err, raw_bytes, raw_time;
  for (std::size_t si = 0; si < S; ++si) {
    const auto& d = points_[series[si].first_point];
    std::vector<cost::Point> pts;
    m_offset.push_back(static_cast<std::int64_t>(raw_bytes.size()));
    for (std::size_t pi : series[si].points) {
      raw_bytes.push_back(static_cast<double>(bytes_max[pi]));
      raw_time.push_back(R.time[pi]);
      raw_series.push_back(static_cast<std::int64_t>(si));
      if (bytes_max[pi] > 0) pts.push_back({static_cast<double>(bytes_max[pi]), R.time[pi]});
    }
    const cost::Fit f = cost::fit_alpha_beta(pts);
    const int n = static_cast<int>(gsize_max[series[si].first_point]);
    m_op.push_back(coll::op_name(d.op));
    m_group.push_back(p_.groups[d.group].label());
    m_transport.push_back(coll::transport_name(e.transport));
    m_dtype.push_back(prof::dtype_name(d.dtype));
    m_in_place.push_back(d.in_place ? 1 : 0);
    m_gsize.push_back(n);
    m_npoints.push_back(static_cast<std::int64_t>(series[si].points.size()));
    m_alpha.push_back(f.ok ? f.alpha_s : std::nan(""));
    m_beta.push_back(f.ok ? f.beta_Bps : std::nan(""));
    m_busbeta.push_back(f.ok ? f.beta_Bps * coll::busbw_factor(d.op, n) : std::nan(""));
    m_err.push_back(f.ok ? f.rel_rms_error : std::nan(""));
  }
  // One line per series on rank 0, like nccl-tests' summary: the largest size's figures.
  // Groups of one rank (inter_node on a single node) only copy locally: one line says so
  // instead of bandwidths that describe no link.
  std::set<std::size_t> single_rank_groups_noted;
  for (std::size_t si = 0; si < S; ++si) {
    const std::size_t last = series[si].points.back();
    const auto& d = points_[last];
    if (gsize_max[last] < 2) {
      if (single_rank_groups_noted.insert(d.group).second)
        progress.note("group " + p_.groups[d.group].label() +
                      ": every group has one rank, so its operations are local copies and "
                      "measure no link (its points are kept in the file)");
      continue;
    }
    char line[256];
    std::snprintf(line, sizeof line, "%s group %s %s %s: %s busbw %.2f GB/s (time %.1f us); fit alpha %.2f us, beta %.2f GB/s, error %.0f%%",
                  coll::op_name(d.op), p_.groups[d.group].label().c_str(), prof::dtype_name(d.dtype),
                  d.in_place ? "in-place" : "out-of-place", size_text(d.requested).c_str(), R.busbw[last] / 1e9,
                  R.time[last] * 1e6, m_alpha[si] * 1e6, m_beta[si] / 1e9, m_err[si] * 100);
    progress.note(line);
  }
  h5::Group model = out.group("model");
  model.attr("formula", "t(m) = alpha_s + m / beta_Bps; m in bytes as in ../bytes; fit: least squares on relative error (weights 1/t^2)");
  const std::vector<std::uint64_t> ds = {S};
  const std::vector<std::uint64_t> dr = {raw_bytes.size()};
  model.write_shared_strings("operation", m_op, {"1", "operation of each series"});
  model.write_shared_strings("group", m_group, {"1", "group kind of each series"});
  model.write_shared_strings("transport", m_transport, {"1", "nccl or mpi"});
  model.write_shared_strings("dtype", m_dtype, {"1", "element type of each series"});
  model.write_shared("in_place", m_in_place, ds, {"1", "1 for in-place series"});
  model.write_shared("group_size", m_gsize, ds, {"1", "ranks per group of the series"});
  model.write_shared("alpha_s", m_alpha, ds, {"s", "fitted latency (time of a zero-byte operation)"});
  model.write_shared("beta_Bps", m_beta, ds, {"B/s", "fitted asymptotic algorithm bandwidth; inf when time does not grow with size"});
  model.write_shared("bus_beta_Bps", m_busbeta, ds, {"B/s", "beta_Bps x bus factor: the bus bandwidth, for extrapolating to other group sizes"});
  model.write_shared("fit_rel_error", m_err, ds, {"1", "relative RMS error of the fit over the series' points"});
  model.write_shared("points", m_npoints, ds, {"1", "raw points of the series"});
  model.write_shared("point_offset", m_offset, ds, {"1", "index of the series' first raw point in raw_bytes / raw_time_s"});
  model.write_shared("raw_bytes", raw_bytes, dr, {"B", "message size of each raw point, series after series, sizes ascending"});
  model.write_shared("raw_time_s", raw_time, dr, {"s", "measured time (time_s) of each raw point"});
  model.write_shared("raw_series", raw_series, dr, {"1", "series index of each raw point"});

  SweepOutcome outcome;
  if (!data_ok) {
    outcome.ok = false;
    outcome.failure = "collectives: " + failure;
  }
  return outcome;
}


// ---- parsing --------------------------------------------------------------------------------
std::unique_ptr<Sweep> parse_collectives(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::Node& n = spec.node;
  n.allow_only({"type", "name", "operations", "min_bytes", "max_bytes", "factor", "dtypes",
                "in_place", "groups", "warmup", "iterations", "check", "root"});
  CollParams p;
  for (const auto& s : n.get_choice_list("operations", coll::op_names(), coll::op_names()))
    p.ops.push_back(coll::op_from_name(s));
  const bool host = ctx.backend == Backend::Host;
  const std::uint64_t min_bytes = n.get_bytes("min_bytes", 8, 1);
  const std::uint64_t max_bytes = n.get_bytes("max_bytes", host ? (1u << 20) : (64u << 20), 1);
  if (min_bytes > max_bytes)
    n.fail(n.has("min_bytes") ? "min_bytes" : "max_bytes",
           "min_bytes (" + std::to_string(min_bytes) + ") is larger than max_bytes (" +
               std::to_string(max_bytes) + ")");
  const std::int64_t factor = n.get_int("factor", 2, 2, 1 << 20);
  for (std::uint64_t s = min_bytes; s <= max_bytes; s *= static_cast<std::uint64_t>(factor)) {
    p.sizes.push_back(s);
    if (s > max_bytes / static_cast<std::uint64_t>(factor)) break;
  }
  p.max_bytes = p.sizes.back();
  for (const auto& s : n.get_choice_list("dtypes", {"float32"}, prof::dtype_names()))
    p.dtypes.push_back(prof::dtype_from_name(s));
  for (const auto& s : n.get_choice_list("in_place", {"false", "true"}, {"false", "true"}))
    p.in_place.push_back(s == "true");
  if (n.has("groups")) {
    const cfg::Node g = n.child("groups");
    auto one = [&](const cfg::Node& e) {
      if (!e.yaml().IsScalar())
        e.fail("", "expected world, intra_node, inter_node or a group size");
      groups::Spec spec;
      std::string err = groups::parse_spec(e.yaml().Scalar(), &spec);
      if (err.empty()) err = groups::validate(spec, ctx.world_size);
      if (!err.empty()) e.fail("", err);
      p.groups.push_back(spec);
    };
    if (g.yaml().IsSequence()) {
      if (g.size() == 0) g.fail("", "expected a non-empty list of groups");
      for (std::size_t i = 0; i < g.size(); ++i) one(g.element(i));
    } else {
      one(g);
    }
  } else {
    p.groups.push_back(groups::Spec{});
  }
  p.warmup = n.get_int("warmup", p.warmup, 0, 1000000);
  p.iterations = n.get_int("iterations", p.iterations, 1, 1000000);
  p.check = n.get_bool("check", true);
  p.root = static_cast<int>(n.get_int("root", 0, 0, ctx.world_size - 1));
  if (host) {
    std::size_t min_elem = 8;
    for (auto t : p.dtypes) min_elem = std::min(min_elem, prof::dtype_size(t));
    if (p.max_bytes / min_elem > static_cast<std::uint64_t>(INT_MAX))
      n.fail("max_bytes", "max_bytes " + std::to_string(p.max_bytes) +
                              " is too large for MPI's int counts on the host path (at most " +
                              std::to_string(static_cast<std::uint64_t>(INT_MAX) * min_elem) + " bytes for these dtypes)");
  }
  return std::make_unique<Collectives>(std::move(p), ctx.world_size);
}

}  // namespace rb
