#include "app/provenance.hpp"

#include <mpi.h>

#include <Kokkos_Macros.hpp>
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "ringbench/version.hpp"
#include "runtime/binding.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/nvml.hpp"

#ifdef RINGBENCH_HAVE_CUDA
#include <nccl.h>

#include "cuda/cuda_backend.hpp"
#endif

extern char** environ;

namespace rb {
namespace {

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string s(text, static_cast<std::size_t>(std::max(len, 0)));
  // Some MPIs end the text with newlines or put build details on later lines.
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string kokkos_version() {
  return fmt::format("{}.{}.{}", KOKKOS_VERSION / 10000, KOKKOS_VERSION / 100 % 100,
                     KOKKOS_VERSION % 100);
}

#ifdef RINGBENCH_HAVE_CUDA
// "CUDA runtime" -> "cuda_runtime": attribute names without spaces read well in h5py.
std::string attribute_name(std::string s) {
  for (char& c : s) c = c == ' ' || c == '-' ? '_' : static_cast<char>(std::tolower(c));
  return s;
}
#endif

// The MPI families are there because the same binary runs over different fabrics and launchers:
// libfabric (FI_*: provider, EFA/CXI settings), PMIx (PMIX_*: the launcher's wire-up), Intel MPI
// (I_MPI_*), MPICH and Cray MPICH (MPICH_*), UCX (UCX_*) and Open MPI (OMPI_*) each pick
// transports and collective algorithms from their variables.
bool changes_results(const std::string& name) {
  static const char* const prefixes[] = {"NCCL_", "CUDA_",  "RINGBENCH_", "OMPI_", "UCX_",   "FI_",
                                         "PMIX_", "I_MPI_", "MPICH_",     "OMP_",  "KOKKOS_"};
  static const char* const exact[] = {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NTASKS"};
  for (const char* p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return std::find(std::begin(exact), std::end(exact), name) != std::end(exact);
}

}  // namespace

NamedValues library_versions() {
  NamedValues v = {
      {"mpi", mpi_library_version()},           {"hdf5", h5::library_version()},
      {"hwloc", hwloc_library_version()},       {"kokkos", kokkos_version()},
#ifdef RINGBENCH_YAML_CPP_VERSION
      {"yaml_cpp", RINGBENCH_YAML_CPP_VERSION},
#endif
  };
#ifdef RINGBENCH_HAVE_CUDA
  int nccl = 0;
  v.emplace_back("nccl", ncclGetVersion(&nccl) == ncclSuccess
                             ? fmt::format("{}.{}.{}", nccl / 10000, nccl / 100 % 100, nccl % 100)
                             : std::string("unknown"));
  for (const auto& [name, text] : attn::gpu::library_versions())
    v.emplace_back(attribute_name(name), text);
#endif
  return v;
}

NamedValues result_environment(const char* const* entries) {
  NamedValues out;
  for (const char* const* e = entries; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    std::string name(*e, static_cast<std::size_t>(eq - *e));
    if (changes_results(name)) out.emplace_back(std::move(name), std::string(eq + 1));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string version_text() {
  std::string s = fmt::format("ringbench {} (commit {}, CUDA path {})\n", kVersion, kGitCommit,
                              built_with_cuda() ? "built" : "not built");
  for (const auto& [name, text] : library_versions()) s += fmt::format("  {}: {}\n", name, text);
  return s;
}

void write_run_provenance(h5::Group& run) {
  run.attr("schema_version", h5::kSchemaVersion);
  h5::Group libraries = run.group("libraries");
  for (const auto& [name, text] : library_versions()) libraries.attr(name, text);
  // Rank 0's environment: the attributes are written once for the file. A launcher that
  // gives ranks different values (per-rank CUDA_VISIBLE_DEVICES) shows rank 0's here.
  NamedValues env = result_environment(environ);
  std::uint64_t n = env.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, run.comm());
  env.resize(n);  // every rank makes the same number of collective attribute calls
  h5::Group environment = run.group("environment");
  for (auto& [name, value] : env) {
    mpi::broadcast_string(name, run.comm());
    environment.attr(name, value);
  }
}

void write_rank_clocks(h5::Group& ranks, const GpuInfo& gpu) {
  const GpuClocks clocks = read_gpu_clocks(gpu.pci_bus_id);
  ranks.write_per_rank("sm_clock_max_hz", clocks.sm_max_hz,
                       {"Hz", "maximum SM clock of the rank's GPU (NVML); NaN when unavailable"});
  ranks.write_per_rank("sm_clock_hz", clocks.sm_current_hz,
                       {"Hz",
                        "SM clock of the rank's GPU when the run started (NVML); NaN when "
                        "unavailable"});
  ranks.write_per_rank_string("sm_clock_note", clocks.note,
                              {"1", "why a clock is NaN; empty when both were read"});
}

}  // namespace rb
