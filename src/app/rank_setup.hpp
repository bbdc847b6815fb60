#pragma once
// Each rank's place: its GPU and CPU binding (every rank set up, or every rank told which
// failed), and the header that says what ran where.
#include <memory>
#include <optional>
#include <string>

#include <mpi.h>

#include "app/cli.hpp"
#include "app/progress.hpp"
#include "app/validation.hpp"
#include "runtime/binding.hpp"
#include "runtime/gpu.hpp"

namespace rb {

struct RankSetup {
  GpuInfo gpu;
  std::string cpuset;
  int numa = -1;
  BindingDecision decision;
  std::string warning;  // the launcher had bound the rank elsewhere, or memory binding failed
  std::unique_ptr<GpuContext> gpu_ctx;
};

// Binds this rank and picks its GPU; nullopt on every rank after each failed rank said why.
std::optional<RankSetup> set_up_rank(const Validated& v, const RankLayout& layout, MPI_Comm world);

// Collective; rank 0 prints the ranks' warnings and, unless --quiet, the header.
void print_header(const Validated& v, const CommandLine& cli, const RankLayout& layout,
                  const RankSetup& s, int min_gpus, int mpi_thread_level, const Screen& screen,
                  MPI_Comm world);

}  // namespace rb
