#include "app/rank_setup.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include <fmt/format.h>

#include "app/agreed_errors.hpp"
#include "app/provenance.hpp"
#include "metrics/text_table.hpp"
#include "ringbench/version.hpp"
#include "runtime/mpi_util.hpp"

namespace rb {
namespace {

// The GPU is chosen first so gpu-near can use its locality. Throws with the reason.
void bind_rank(const Validated& v, const RankLayout& layout, RankSetup& s) {
  if (v.backend == Backend::Cuda) s.gpu = select_gpu(layout.local_rank);
  Topology topo = Topology::load_this_machine();
  const std::string before = topo.current_cpuset();
  const bool has_gpu = !s.gpu.pci_bus_id.empty();
  const MachineModel machine = has_gpu ? topo.model_for_gpus({s.gpu.pci_bus_id}) : topo.model();
  // model_for_gpus lists only this rank's GPU, at slot 0.
  s.decision = decide_binding(machine, v.config.binding.policy, layout.local_rank,
                              layout.local_size, has_gpu ? 0 : -1);
  std::string membind_warning;
  s.cpuset = before;
  try {
    if (!s.decision.pus.empty()) s.cpuset = topo.apply(s.decision, &membind_warning);
  } catch (const std::exception& e) {
    throw std::runtime_error("binding failed: " + std::string(e.what()));
  }
  s.warning = launcher_binding_warning(before, topo.machine_cpuset(), s.decision);
  if (!membind_warning.empty()) s.warning += (s.warning.empty() ? "" : "; ") + membind_warning;
  s.numa = topo.current_numa_node();
}

void print_rank_warnings(const std::vector<std::string>& warnings) {
  for (std::size_t i = 0; i < warnings.size(); ++i)
    if (!warnings[i].empty())
      fmt::print(stderr, "ringbench: warning: rank {}: {}\n", i, warnings[i]);
}

}  // namespace

std::optional<RankSetup> set_up_rank(const Validated& v, const RankLayout& layout, MPI_Comm world) {
  RankSetup s;
  std::string error;
  try {
    bind_rank(v, layout, s);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (rank_errors_reported(error, world)) return std::nullopt;
  // The world NCCL communicator is made by the first sweep that needs it (GpuContext).
  if (v.backend == Backend::Cuda) s.gpu_ctx = std::make_unique<GpuContext>(s.gpu, world);
  return s;
}

// What ran where, on the results stream (a log of stdout says what its tables measured);
// every line wrapped to the terminal's width, continued two spaces further in.
void print_header(const Validated& v, const CommandLine& cli, const RankLayout& layout,
                  const RankSetup& s, int min_gpus, int mpi_thread_level, const Screen& screen,
                  MPI_Comm world) {
  std::string line =
      fmt::format("rank {} on {} (node {}, local {}): cpus {}, NUMA {}", layout.rank,
                  layout.hostname, layout.node_index, layout.local_rank, s.cpuset, s.numa);
  if (s.gpu.index >= 0) line += fmt::format(", GPU {} {}", s.gpu.index, s.gpu.name);
  const auto lines = mpi::gather_strings(line, world);
  const auto warnings = mpi::gather_strings(s.warning, world);
  if (layout.rank != 0) return;
  print_rank_warnings(warnings);
  if (cli.quiet) return;
  // --wide keeps each header line whole, as the tables' rows.
  const std::size_t width = screen.table_width == 0 ? std::string::npos : screen.table_width;
  const auto say = [&](const std::string& text, const std::string& first) {
    fmt::print(screen.results, "{}", h5::wrapped(text, width, first, first + "  "));
  };
  say(fmt::format("ringbench {} (commit {}): {}", kVersion, kGitCommit, cli.config_path), "");
  say(fmt::format("{}, backend {}, {} GPU(s) per rank visible, binding {}, MPI thread level {}",
                  layout_text(layout), to_string(v.backend), min_gpus,
                  to_string(v.config.binding.policy),
                  MpiEnvironment::thread_level_name(mpi_thread_level)),
      "");
  std::string libraries;
  for (const auto& [name, text] : library_versions())
    libraries += fmt::format("{}{} {}", libraries.empty() ? "" : "; ", name, text);
  say("libraries: " + libraries, "");
  const std::size_t shown = std::min<std::size_t>(lines.size(), 16);
  for (std::size_t i = 0; i < shown; ++i) say(lines[i], "  ");
  if (lines.size() > shown)
    fmt::print(screen.results, "  ... {} more ranks (see /ranks in the output)\n",
               lines.size() - shown);
  std::fflush(screen.results);
}

}  // namespace rb
