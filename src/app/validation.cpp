#include "app/validation.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "app/agreed_errors.hpp"
#include "app/plan.hpp"
#include "app/registry.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi_util.hpp"
#include "sweeps/oom_point.hpp"

namespace rb {

// Rank 0 reads the file; every rank gets the same text (or nothing, after rank 0 said why).
std::optional<std::string> read_config(const std::string& path, MPI_Comm world) {
  std::string text, error;
  if (mpi::rank_of(world) == 0) {
    try {
      text = read_config_file(path);
    } catch (const cfg::ConfigError& e) {
      error = e.what();
    }
  }
  if (first_error_reported(error, "invalid config: ", world)) return std::nullopt;
  mpi::broadcast_string(text, world);
  return text;
}

namespace {

// The backend this run uses. `auto` takes the GPU when this build has one and every rank sees
// one; `cuda` without GPUs can still be planned (a login node), not run.
Backend resolve_backend(const Config& config, const cfg::Node& root, bool dry_run, int min_gpus,
                        std::string* plan_note) {
  switch (config.backend) {
    case Backend::Host:
      return Backend::Host;
    case Backend::Auto:
      return built_with_cuda() && min_gpus > 0 ? Backend::Cuda : Backend::Host;
    case Backend::Cuda:
      break;
  }
  if (!built_with_cuda())
    root.fail("backend",
              "backend 'cuda' asked for, but this ringbench was built without "
              "CUDA/NCCL (rebuild with -DRINGBENCH_ENABLE_CUDA=ON)");
  if (min_gpus == 0) {
    if (!dry_run)
      root.fail("backend",
                "backend 'cuda' asked for, but at least one rank sees no GPU "
                "(check CUDA_VISIBLE_DEVICES and the allocation)");
    *plan_note =
        "no GPU is visible here: validated and planned for the cuda backend; "
        "the run itself needs a GPU on every rank";
  }
  return Backend::Cuda;
}

bool selected(const CommandLine& cli, const std::string& sweep) {
  return cli.only.empty() || std::find(cli.only.begin(), cli.only.end(), sweep) != cli.only.end();
}

void check_only_names(const CommandLine& cli, const Config& config) {
  std::vector<std::string> names;
  for (const auto& s : config.sweeps) names.push_back(s.name);
  for (const auto& name : cli.only) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const std::string hint = cfg::did_you_mean(name, names);
    throw cfg::ConfigError({cli.config_path, 0, 0}, "--only",
                           fmt::format("no sweep named '{}' in this file{}", name,
                                       hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  }
}

// Host buffers that cannot fit in this node's physical memory are refused before any work (the
// sweeps that have them say which key). Each rank checks its own node; `planned`: the layout is
// another machine's (--world-size), whose memory is not known here.
void check_node_memory(const Validated& v, const CommandLine& cli, const RankLayout& layout,
                       bool planned) {
  const std::uint64_t node_memory = planned ? 0 : oom::meminfo_bytes("MemTotal");
  std::size_t i = 0;
  for (const auto& spec : v.config.sweeps) {
    if (!selected(cli, spec.name)) continue;
    if (const auto need = v.sweeps[i++]->host_memory_need())
      oom::check_host_memory_fits(spec.node, need->key, need->bytes, layout.local_size, node_memory,
                                  need->what);
  }
}

// Parses and validates everything a run needs, on every rank, from the text rank 0 read.
// Throws cfg::ConfigError; every rank sees the same text and context, so the same verdict
// (but for the node's memory, which each rank checks for its own node).
Validated validate(const std::string& text, const CommandLine& cli, const RankLayout& layout,
                   int min_gpus, bool planned) {
  Validated v;
  v.config = parse_config_text(text, cli.config_path);  // the one parse of the text
  v.backend = resolve_backend(v.config, v.config.root, cli.dry_run, min_gpus, &v.plan_note);
  check_only_names(cli, v.config);
  const ParseContext pctx{layout.world_size, layout.node_count, v.backend, v.config.kernel_policy};
  for (const auto& spec : v.config.sweeps) {
    if (!selected(cli, spec.name)) continue;
    auto sweep = parse_sweep(spec, pctx);
    sweep->set_name(spec.name);
    v.sweeps.push_back(std::move(sweep));
  }
  check_node_memory(v, cli, layout, planned);
  return v;
}

// --world-size N: the layout a job of N ranks would have (K per node, --ranks-per-node; one
// node without it), for a dry-run on a machine that is not the job's (a login node).
RankLayout planned_layout(const CommandLine& cli) {
  RankLayout l;
  l.world_size = cli.world_size;
  const int k = cli.simulated.active() ? cli.simulated.ranks_per_node : cli.world_size;
  l.node_count = (cli.world_size + k - 1) / k;
  l.local_size = std::min(k, cli.world_size);
  l.simulated = cli.simulated;
  l.hostname = "(planned)";
  return l;
}

}  // namespace

std::optional<Validated> validate_everywhere(const std::string& text, const CommandLine& cli,
                                             const RankLayout& layout, int min_gpus, MPI_Comm world,
                                             bool planned) {
  std::optional<Validated> v;
  std::string error;
  try {
    v = validate(text, cli, layout, min_gpus, planned);
  } catch (const cfg::ConfigError& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = cli.config_path + ": " + e.what();
  }
  if (first_error_reported(error, "invalid config: ", world)) return std::nullopt;
  return v;
}

std::string layout_text(const RankLayout& layout) {
  std::string s = fmt::format("ranks {}, nodes {}", layout.world_size, layout.node_count);
  if (layout.simulated.active())
    s += fmt::format(" (simulated: {} ranks per node, {} placement)",
                     layout.simulated.ranks_per_node, to_string(layout.simulated.placement));
  return s;
}

int print_validated_plan(const Validated& v, const CommandLine& cli, const RankLayout& layout,
                         std::string where) {
  if (where.empty()) where = layout_text(layout);
  return print_plan({v.sweeps, where, layout.world_size, v.backend,
                     to_string(v.config.binding.policy), v.plan_note, &v.config.run},
                    cli);
}

// Rank 0's plan for --world-size without a launcher: no collective beyond this process.
int plan_without_launcher(const CommandLine& cli, const std::string& text, MPI_Comm world) {
  if (mpi::size_of(world) > 1) {
    if (mpi::rank_of(world) == 0)
      fmt::print(stderr,
                 "ringbench: --world-size plans a job without a launcher, but this one "
                 "already has {} ranks: drop --world-size, or run without mpirun\n",
                 mpi::size_of(world));
    return 2;
  }
  const RankLayout layout = planned_layout(cli);
  std::optional<Validated> v =
      validate_everywhere(text, cli, layout, visible_gpu_count(), world, /*planned=*/true);
  if (!v) return 1;
  std::string where = layout_text(layout);
  const auto simulated = where.find("(simulated: ");
  if (simulated != std::string::npos) where.replace(simulated + 1, 10, "planned:");
  return print_validated_plan(*v, cli, layout, where);
}

}  // namespace rb
