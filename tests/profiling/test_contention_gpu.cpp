// The contention sweep on the cuda backend (label gpu; exits 77 without a GPU): rank 0 runs
// every GPU workload and both host ones through every phase (core, numa, gpu-near), the last
// rank feeds (pageable host copies, CPU work, pageable H2D into the same GPU). Both ranks may
// share one GPU: the sweep uses no NCCL, so the run context gets an empty communicator.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "metrics/h5.hpp"
#include "runtime/binding.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi.hpp"
#include "ring/host_sweep.hpp"
#include "runtime/mpi_util.hpp"
#include "sweeps/contention/contention.hpp"
#include "test_support.hpp"

namespace {

const char* const kYaml =
    "sweeps:\n  - type: contention\n    name: contention\n"
    "    workloads: [attention, gemm, d2d_copy, h2d_pinned, d2h_pinned, h2d_pageable, d2h_pageable,"
    " triad, host_attention]\n"
    "    feeders: 1\n    iterations: 5\n    warmup: 1\n    cooldown_s: 0\n    monitor_interval_ms: "
    "20\n"
    "    attention: {rows: 1024, heads: 4, head_dim: 128, dtype: bf16}\n"
    "    host_attention: {rows: 64, heads: 2, head_dim: 16}\n    gemm: {size: 1024}\n"
    "    copy_bytes: 16MiB\n    triad_bytes: 16MiB\n    feeder: {copy_bytes: 4MiB, threads: 2}\n";

std::string run_on_gpu(const std::string& yaml, const rb::GpuInfo& gpu) {
  const rb::Config cfg = rb::parse_config_text(yaml, "contention_gpu.yaml");
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  rb::ParseContext pctx;
  pctx.world_size = layout.world_size;
  pctx.backend = rb::Backend::Cuda;
  auto sweep = rb::parse_contention(cfg.sweeps.at(0), pctx);
  sweep->set_name("contention");
  const std::string path = rb::test::test_path("profiling", "contention_gpu");
  rb::GpuContext gctx(gpu, MPI_COMM_WORLD);  // no sweep here asks for NCCL
  const rb::SweepOutcome o =
      rbtest::run_sweep_into(path, *sweep, cfg, layout, rb::Backend::Cuda, &gctx);
  CAPTURE(o.failure);
  CHECK(o.ok);
  return path;
}

std::string gpu_near_cpuset(const rb::GpuInfo& gpu) {
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  const rb::Topology topo = rb::Topology::load_this_machine();
  return rb::format_cpu_list(rb::decide_binding(topo.model_for_gpus({gpu.pci_bus_id}),
                                                rb::BindingPolicy::GpuNear, layout.local_rank,
                                                layout.local_size, 0)
                                 .pus);
}

}  // namespace

TEST_CASE("contention sweep on the GPU: every workload, gpu-near, a feeder, NVML series") {
  if (rb::test::world() < 2) return;  // a feeder needs a second rank
  const rb::GpuInfo gpu = rb::select_gpu(rb::discover_rank_layout(MPI_COMM_WORLD).local_rank);
  const std::string path = run_on_gpu(kYaml, gpu);
  const auto near = rb::mpi::gather_strings(gpu_near_cpuset(gpu), MPI_COMM_WORLD);
  if (rb::test::rank() != 0) return;
  const std::string g = "/sweeps/contention/";
  const auto phase = rb::h5::read_strings(path, g + "points/phase");
  const auto workload = rb::h5::read_strings(path, g + "points/workload");
  const std::size_t P = phase.size(), W = 9;
  REQUIRE(P == 5 * W);  // alone, unbound, core, numa, gpu-near
  const auto median = rb::h5::read_doubles(path, g + "median_s");
  const auto bps = rb::h5::read_doubles(path, g + "rate_Bps");
  const auto tflops = rb::h5::read_doubles(path, g + "rate_tflops");
  const auto errors = rb::h5::read_strings(path, g + "error");
  const auto cpuset = rb::h5::read_strings(path, g + "cpuset");
  const auto fed = rb::h5::read_doubles(path, g + "fed_bytes");
  const int feeder = rb::test::world() - 1;
  for (std::size_t p = 0; p < P; ++p) {
    CAPTURE(phase[p]);
    CAPTURE(workload[p]);
    CHECK(errors[p] == "");
    CHECK(median[p] > 0);
    const bool flops =
        workload[p] == "attention" || workload[p] == "gemm" || workload[p] == "host_attention";
    CHECK((flops ? tflops[p] : bps[p]) > 0);
    if (phase[p] == "concurrent_bound:gpu-near") {
      CHECK(cpuset[p] == near[0]);
      CHECK(cpuset[static_cast<std::size_t>(feeder) * P + p] ==
            near[static_cast<std::size_t>(feeder)]);
    }
    if (p >= W) CHECK(fed[static_cast<std::size_t>(feeder) * P + p] > 0);
  }
  // Rank 0 (the lowest local rank on its GPU) recorded the GPU series: read, or said why not.
  const auto bus = rb::h5::read_strings(path, g + "monitor/gpu_pci_bus_id");
  CHECK(bus[0] == gpu.pci_bus_id);
  std::vector<std::uint64_t> dims;
  const auto sm = rb::h5::read_doubles(path, g + "monitor/sm_clock_hz", &dims);
  bool any = false;
  for (std::size_t i = 0; i < dims[1]; ++i) any = any || std::isfinite(sm[i]);
  const auto unavailable = rb::h5::read_strings(path, g + "monitor/unavailable");
  MESSAGE("rank 0 monitor unavailable: " << unavailable[0]);
  CHECK((any || unavailable[0].find("sm_clock") != std::string::npos ||
         unavailable[0].find("gpu") != std::string::npos));
}
