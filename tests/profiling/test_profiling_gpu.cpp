// Profiling sweeps, NCCL/CUDA path: every NCCL collective's data (all dtypes, in and out of
// place, world and block groups), cuBLASLt GEMM and copy timing, and the four sweeps run end
// to end on the cuda backend into HDF5. Linked with the GPU test main: exits 77 (skipped)
// without a GPU. Label gpu.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/paths.hpp"
#include "app/progress.hpp"
#include "config/config.hpp"
#include "metrics/h5.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi.hpp"
#include "profiling/collective_table.hpp"
#include "sweeps/collectives.hpp"
#include "sweeps/compute.hpp"
#include "profiling/groups.hpp"
#include "sweeps/memory.hpp"
#include "sweeps/p2p_matrix.hpp"
#include "profiling/timing.hpp"

#ifdef RINGBENCH_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backend.hpp"
#include "cuda/profiling/profiling_cuda.hpp"

namespace {

using rb::coll::Op;
using rb::prof::DType;

const rb::RankLayout& layout() {
  static const rb::RankLayout l = [] {
    rb::RankLayout x = rb::discover_rank_layout(MPI_COMM_WORLD);
    rb::select_gpu(x.local_rank);
    return x;
  }();
  return l;
}

// NCCL refuses two ranks of one communicator on the same GPU: with more ranks per node than
// GPUs (e.g. np 4 on a 1-GPU machine) the NCCL cases have nothing valid to test.
bool enough_gpus() {
  const bool ok = layout().local_size <= rb::visible_gpu_count();
  if (!ok && layout().rank == 0)
    MESSAGE("skipped: " << layout().local_size << " ranks per node but " << rb::visible_gpu_count()
                        << " GPU(s); NCCL needs one GPU per rank");
  return ok;
}

std::size_t nccl_run_and_check(rb::NcclComm& comm, Op op, DType t, bool in_place,
                               std::size_t requested, int root, rb::prof::cuda::Stream& stream) {
  const int n = comm.size(), rank = comm.rank();
  rb::prof::cuda::DeviceBuffer send(requested + 256), recv(requested + 256);
  rb::coll::Call c = rb::coll::call_for(op, t, in_place, requested, rank, n, root);
  c.send = send.get();
  c.recv = recv.get();
  const rb::coll::Regions r = rb::coll::regions(c, rb::coll::Transport::Nccl);
  rb::prof::cuda::fill_zero(r.zero, r.zero_bytes, stream.get());
  rb::prof::cuda::fill_input(r.input, r.input_count, t, rank, stream.get());
  rb::coll::collective(op).nccl(c, comm.raw(), stream.get());
  return rb::prof::cuda::count_mismatches(r.output, r.output_count, t, r.expect, stream.get());
}

}  // namespace

TEST_CASE("device memory that cannot be had is attn::OutOfMemory, and the device still works") {
  (void)layout();  // selects this rank's GPU
  std::size_t free_bytes = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  const std::size_t too_much = total + (std::size_t{1} << 30);
  bool thrown = false;
  try {
    rb::prof::cuda::DeviceBuffer huge(too_much);
  } catch (const rb::attn::OutOfMemory& e) {
    thrown = true;
    CHECK(e.requested() == too_much);
    CHECK(e.free_bytes() > 0);
    CHECK(e.free_bytes() <= total);
  }
  CHECK(thrown);
  CHECK(cudaGetLastError() == cudaSuccess);     // not left behind for the next check
  rb::prof::cuda::DeviceBuffer small(1 << 20);  // the device goes on
  CHECK(small.get() != nullptr);
}

TEST_CASE("every NCCL collective delivers the expected data") {
  if (!enough_gpus()) return;
  rb::NcclComm world(MPI_COMM_WORLD);
  rb::prof::cuda::Stream stream;
  for (Op op : {Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::AllToAll, Op::Broadcast,
                Op::Reduce, Op::SendRecv})
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32})
      for (bool ip : {false, true}) {
        if (ip && !rb::coll::supports_in_place(op)) continue;
        for (std::size_t bytes : {std::size_t(8), std::size_t(4000), std::size_t(3 << 20)}) {
          CAPTURE(rb::coll::op_name(op));
          CAPTURE(rb::prof::dtype_name(t));
          CAPTURE(ip);
          CAPTURE(bytes);
          CHECK(nccl_run_and_check(world, op, t, ip, bytes, world.size() - 1, stream) == 0);
        }
      }
}

TEST_CASE("NCCL collectives in concurrent block groups") {
  if (!enough_gpus()) return;
  const int n = layout().world_size;
  for (int block = 1; block <= n; ++block) {
    if (n % block) continue;
    rb::groups::Spec spec;
    REQUIRE(rb::groups::parse_spec(std::to_string(block), &spec).empty());
    rb::groups::Group g = rb::groups::make_group(spec, MPI_COMM_WORLD, layout());
    rb::NcclComm comm(g.get());
    rb::prof::cuda::Stream stream;
    CHECK(comm.size() == block);
    CHECK(nccl_run_and_check(comm, Op::AllReduce, DType::BF16, false, 1 << 20, 0, stream) == 0);
    CHECK(nccl_run_and_check(comm, Op::SendRecv, DType::F32, false, 1 << 20, 0, stream) == 0);
  }
}

TEST_CASE("cuBLASLt GEMM and copy timings are positive for every type and kind") {
  layout();
  rb::prof::cuda::Stream stream;
  for (const char* t : {"bfloat16", "float16", "tf32", "float32", "float64"}) {
    CAPTURE(t);
    const auto s = rb::prof::cuda::gemm_seconds(t, 256, 256, 256, 1, 3, stream.get());
    REQUIRE(s.size() == 3);
    for (double x : s) CHECK(x > 0);
  }
  for (const char* k : {"d2d", "h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"}) {
    CAPTURE(k);
    const auto s = rb::prof::cuda::copy_seconds(k, 8 << 20, 1, 3, stream.get());
    REQUIRE(s.size() == 3);
    for (double x : s) CHECK(x > 0);
  }
}

namespace {
std::string run_gpu_sweep(const std::string& stem, const std::string& yaml,
                          std::unique_ptr<rb::Sweep> (*parse)(const rb::SweepSpec&,
                                                              const rb::ParseContext&),
                          rb::GpuContext& gpu, rb::SweepOutcome* outcome) {
  rb::Config cfg = rb::parse_config_text(yaml, stem + ".yaml");
  rb::ParseContext pctx;
  pctx.world_size = layout().world_size;
  pctx.node_count = layout().node_count;
  pctx.backend = rb::Backend::Cuda;
  auto sweep = parse(cfg.sweeps.at(0), pctx);
  sweep->set_name(cfg.sweeps.at(0).name);
  const char* dir = std::getenv("RINGBENCH_TEST_OUTPUT");
  const std::string path = std::string(dir ? dir : "/tmp") + "/profiling_gpu_" + stem + "_np" +
                           std::to_string(layout().world_size) + ".h5";
  rb::h5::File file = rb::h5::File::create(path, MPI_COMM_WORLD, true);
  rb::h5::Group root = file.root();
  rb::h5::Group out = root.group("sweeps").group(sweep->name());
  const rb::PathFactories paths = rb::make_path_factories(rb::Backend::Cuda);
  rb::Progress progress(layout().rank, sweep->name(), sweep->plan().size());
  rb::RunContext ctx{cfg, MPI_COMM_WORLD, layout(), rb::Backend::Cuda, &gpu, paths, progress};
  *outcome = sweep->run(ctx, out);
  file.close();
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}
}  // namespace

TEST_CASE("the profiling sweeps run end to end on the cuda backend") {
  if (!enough_gpus()) return;
  rb::GpuContext gpu(rb::select_gpu(layout().local_rank), MPI_COMM_WORLD);
  const int n = layout().world_size;
  rb::SweepOutcome o;
  std::string path = run_gpu_sweep(
      "collectives",
      "sweeps:\n  - type: collectives\n    min_bytes: 1KiB\n    max_bytes: 4MiB\n    factor: 16\n"
      "    dtypes: [float32, bfloat16]\n    groups: [world, intra_node, inter_node, 1]\n    "
      "iterations: 5\n",
      rb::parse_collectives, gpu, &o);
  CHECK(o.ok);
  for (auto w : rb::h5::read_ints(path, "/sweeps/collectives/wrong_elements")) CHECK(w == 0);
  for (double b : rb::h5::read_doubles(path, "/sweeps/collectives/time_s")) CHECK(b > 0);
  CHECK(rb::h5::read_string_attr(path, "/sweeps/collectives", "transport") == "nccl");

  path = run_gpu_sweep(
      "p2p", "sweeps:\n  - type: p2p_matrix\n    bandwidth_bytes: 16MiB\n    iterations: 5\n",
      rb::parse_p2p_matrix, gpu, &o);
  CHECK(o.ok);
  // Pair points: the pair's two ranks hold a figure, the others NaN.
  std::size_t measured = 0;
  for (double b : rb::h5::read_doubles(path, "/sweeps/p2p_matrix/bandwidth_Bps"))
    if (!std::isnan(b)) {
      CHECK(b > 1e9);  // faster than any NIC-less host path
      ++measured;
    }
  CHECK(measured == static_cast<std::size_t>(2 * n * (n - 1)));

  path = run_gpu_sweep("compute",
                       "sweeps:\n  - type: compute\n    sizes: [512, 1024]\n    iterations: 3\n",
                       rb::parse_compute, gpu, &o);
  CHECK(o.ok);
  for (double t : rb::h5::read_doubles(path, "/sweeps/compute/rate_tflops")) CHECK(t > 0.1);

  path = run_gpu_sweep("memory", "sweeps:\n  - type: memory\n    bytes: 64MiB\n    iterations: 3\n",
                       rb::parse_memory, gpu, &o);
  CHECK(o.ok);
  const auto kinds = rb::h5::read_strings(path, "/sweeps/memory/points/kind");
  const auto bw = rb::h5::read_doubles(path, "/sweeps/memory/bandwidth_Bps");
  for (std::size_t i = 0; i < bw.size(); ++i) {
    const std::string& kind = kinds[i % kinds.size()];
    CAPTURE(kind);
    if (kind == "d2d") CHECK(bw[i] > 1e11);
    if (kind == "h2d_pinned") CHECK(bw[i] > 1e9);
  }
}

#else
TEST_CASE("profiling GPU tests need a CUDA build") {
  CHECK(true);
}
#endif
