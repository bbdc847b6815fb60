#pragma once
// What a result depends on besides the config: library versions, the environment variables
// that change results, and each GPU's clocks. Written to /run and /ranks
// (docs/hdf5-schema.md) and printed by --version and the run header.
#include <string>
#include <utility>
#include <vector>

#include "metrics/h5.hpp"

namespace rb {

struct GpuInfo;

using NamedValues = std::vector<std::pair<std::string, std::string>>;

// (attribute name, version text): mpi, hdf5, hwloc, kokkos, yaml_cpp and, in CUDA builds,
// nccl, cuda_runtime, cuda_driver, cublas, cudnn. Needs MPI initialised; no GPU needed.
NamedValues library_versions();

// The variables of this process's environment that change results, sorted by name: NCCL_*,
// CUDA_*, RINGBENCH_*, the MPI families (OMPI_*, UCX_*, FI_*, PMIX_*, I_MPI_*, MPICH_*), OMP_*,
// KOKKOS_*, SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_NTASKS. `environ` is passed in so tests can
// give their own.
NamedValues result_environment(const char* const* environ_entries);

// "ringbench 0.1.0 (commit abc, CUDA path built)" and one line per library.
std::string version_text();

// Collective: /run@schema_version, /run/libraries and /run/environment (rank 0's values).
void write_run_provenance(h5::Group& run);
// Collective: /ranks/sm_clock_max_hz and /ranks/sm_clock_hz (NaN where unavailable) and
// /ranks/sm_clock_note ("" when both were read).
void write_rank_clocks(h5::Group& ranks, const GpuInfo& gpu);

}  // namespace rb
