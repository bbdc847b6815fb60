#include "app/driver.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <memory>
#include <sstream>
#include <stdexcept>

#include <mpi.h>

#include "config/config.hpp"
#include "metrics/h5.hpp"
#include "ringbench/version.hpp"
#include "runtime/binding.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi.hpp"
#include "app/progress.hpp"
#include "app/paths.hpp"
#include "app/registry.hpp"

namespace rb {
namespace {

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string utc_now_compact() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

void broadcast_string(std::string& s, MPI_Comm comm) {
  unsigned long long n = s.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
  s.resize(n);
  if (n > 0) MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, 0, comm);
}

// Every rank contributes a flag; all get the OR. Used wherever one rank may see a problem
// the others do not (a GPU missing on one node), so no rank goes on alone and hangs.
bool any_rank(bool flag, MPI_Comm comm) {
  int local = flag ? 1 : 0, global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, comm);
  return global != 0;
}

std::vector<std::string> gather_strings(const std::string& mine, MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(size), displs(size);
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm);
  int total = 0;
  for (int i = 0; i < size; ++i) {
    displs[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                 comm);
  std::vector<std::string> out;
  for (int i = 0; i < size; ++i) out.push_back(all.substr(displs[i], lens[i]));
  return out;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

struct Validated {
  Config config;
  Backend backend = Backend::Host;
  std::vector<std::unique_ptr<Sweep>> sweeps;
  std::string plan_note;  // said with a --dry-run plan (e.g. planned for GPUs on a login node)
};

// Parses and validates everything a run needs, on every rank, from the text rank 0 read.
// Throws cfg::ConfigError; every rank sees the same text and context, so the same verdict.
Validated validate(const std::string& text, const std::string& path, const CommandLine& cli,
                   const RankLayout& layout, int min_gpus_over_ranks) {
  Validated v;
  v.config = parse_config_text(text, path);
  const cfg::Node root(YAML::Load(text), path, "");
  switch (v.config.backend) {
    case Backend::Host:
      v.backend = Backend::Host;
      break;
    case Backend::Cuda:
      if (!built_with_cuda())
        root.fail("backend", "backend 'cuda' asked for, but this ringbench was built without "
                             "CUDA/NCCL (rebuild with -DRINGBENCH_ENABLE_CUDA=ON)");
      if (min_gpus_over_ranks == 0) {
        // A plan can be checked on a login node without GPUs; a run cannot.
        if (!cli.dry_run)
          root.fail("backend", "backend 'cuda' asked for, but at least one rank sees no GPU "
                               "(check CUDA_VISIBLE_DEVICES and the allocation)");
        v.plan_note = "no GPU is visible here: validated and planned for the cuda backend; "
                      "the run itself needs a GPU on every rank";
      }
      v.backend = Backend::Cuda;
      break;
    case Backend::Auto:
      v.backend = (built_with_cuda() && min_gpus_over_ranks > 0) ? Backend::Cuda : Backend::Host;
      break;
  }
  ParseContext pctx{layout.world_size, layout.node_count, v.backend};
  for (const auto& name : cli.only) {
    const bool known = std::any_of(v.config.sweeps.begin(), v.config.sweeps.end(),
                                   [&](const SweepSpec& s) { return s.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& s : v.config.sweeps) names.push_back(s.name);
      std::string hint = cfg::did_you_mean(name, names);
      throw cfg::ConfigError({path, 0, 0}, "--only",
                             "no sweep named '" + name + "' in this file" +
                                 (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
  }
  for (const auto& spec : v.config.sweeps) {
    if (!cli.only.empty() &&
        std::find(cli.only.begin(), cli.only.end(), spec.name) == cli.only.end())
      continue;
    auto sweep = parse_sweep(spec, pctx);
    sweep->set_name(spec.name);
    v.sweeps.push_back(std::move(sweep));
  }
  return v;
}

std::string default_output_path(const Config& c, MPI_Comm world) {
  // One timestamp for all ranks (rank 0's), so every rank opens the same file.
  std::string stamp = utc_now_compact();
  broadcast_string(stamp, world);
  std::string dir = c.run.output_dir.empty() ? "." : c.run.output_dir;
  return dir + "/" + c.run.name + "_" + stamp + ".h5";
}

void write_ranks_table(h5::Group& root, const RankLayout& layout, const GpuInfo& gpu,
                       const std::string& cpuset, int numa, const BindingDecision& decision) {
  h5::Group ranks = root.group("ranks");
  ranks.write_per_rank("rank", static_cast<std::int64_t>(layout.rank),
                       {"1", "MPI rank in MPI_COMM_WORLD"});
  ranks.write_per_rank_string("hostname", layout.hostname, {"1", "host the rank ran on"});
  ranks.write_per_rank("node_index", static_cast<std::int64_t>(layout.node_index),
                       {"1", "node index, ordered by the lowest rank on each node"});
  ranks.write_per_rank("local_rank", static_cast<std::int64_t>(layout.local_rank),
                       {"1", "rank within its node (from MPI_Comm_split_type shared)"});
  ranks.write_per_rank("gpu_index", static_cast<std::int64_t>(gpu.index),
                       {"1", "CUDA device ordinal the rank drove; -1 on the host path"});
  ranks.write_per_rank_string("gpu_name", gpu.name, {"1", "GPU product name; empty on host"});
  ranks.write_per_rank_string("gpu_uuid", gpu.uuid, {"1", "GPU UUID; empty on host"});
  ranks.write_per_rank_string("gpu_pci_bus_id", gpu.pci_bus_id,
                              {"1", "GPU PCI bus id; empty on host"});
  ranks.write_per_rank_string("cpuset", cpuset, {"1", "effective CPU binding (PU list) after "
                                                      "ringbench applied its policy"});
  ranks.write_per_rank("numa_node", static_cast<std::int64_t>(numa),
                       {"1", "NUMA node covering the cpuset; -1 when several or unknown"});
  ranks.write_per_rank_string("binding_policy", to_string(decision.policy),
                              {"1", "binding policy from the config"});
  ranks.write_per_rank_string("binding_explanation", decision.explanation,
                              {"1", "why this binding was chosen"});
}

}  // namespace

std::string usage_text() {
  std::string s =
      "usage: ringbench CONFIG.yaml [--output FILE.h5] [--only SWEEP[,SWEEP]] [--dry-run]\n"
      "                 [--force] [--help] [--version]\n"
      "Runs the sweeps named in CONFIG.yaml on every rank (launch with mpirun/srun) and writes\n"
      "all per-rank metrics into one HDF5 file.\n"
      "  --output FILE.h5   output file (default: <run.output_dir>/<run.name>_<UTC time>.h5)\n"
      "  --only A,B         run only the named sweeps\n"
      "  --dry-run          validate the config and print the plan; run nothing\n"
      "  --force            overwrite an existing --output file\n"
      "Sweep types:\n";
  for (const auto& k : sweep_kinds()) s += std::string("  ") + k.type + ": " + k.summary + "\n";
  s += "Docs: docs/config.md (YAML reference), docs/hdf5-schema.md (output layout).\n";
  return s;
}

CommandLine parse_command_line(const std::vector<std::string>& args) {
  CommandLine cl;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* opt) -> std::string {
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0) {
        cl.error = std::string(opt) + " needs a value";
        return "";
      }
      return args[++i];
    };
    if (a == "--help" || a == "-h") cl.help = true;
    else if (a == "--version") cl.version = true;
    else if (a == "--dry-run") cl.dry_run = true;
    else if (a == "--force") cl.force = true;
    else if (a == "--output" || a == "-o") cl.output = value("--output");
    else if (a.rfind("--output=", 0) == 0) cl.output = a.substr(9);
    else if (a == "--only") {
      for (auto& s : split_commas(value("--only"))) cl.only.push_back(s);
    } else if (a.rfind("--only=", 0) == 0) {
      for (auto& s : split_commas(a.substr(7))) cl.only.push_back(s);
    } else if (a.rfind("--kokkos-", 0) == 0) {
      continue;  // Kokkos' own options, consumed by Kokkos::initialize
    } else if (a.rfind("-", 0) == 0) {
      cl.error = "unknown option '" + a + "'";
    } else if (cl.config_path.empty()) {
      cl.config_path = a;
    } else {
      cl.error = "more than one config file given ('" + cl.config_path + "' and '" + a + "')";
    }
    if (!cl.error.empty()) return cl;
  }
  if (!cl.help && !cl.version && cl.config_path.empty()) cl.error = "no config file given";
  if (!cl.output.empty() && cl.output.size() < 3) cl.error = "--output needs a file name";
  return cl;
}

int run_ringbench(int argc, char** argv, int mpi_thread_level) {
  MPI_Comm world = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command_line = argv[0];
  for (const auto& a : args) command_line += " " + a;

  const CommandLine cli = parse_command_line(args);
  if (!cli.error.empty()) {
    if (rank == 0) std::fprintf(stderr, "ringbench: %s\n\n%s", cli.error.c_str(), usage_text().c_str());
    return 2;
  }
  if (cli.help || cli.version) {
    if (rank == 0) {
      if (cli.version)
        std::printf("ringbench %s (commit %s, CUDA path %s)\n", kVersion, kGitCommit,
                    built_with_cuda() ? "built" : "not built");
      else
        std::printf("%s", usage_text().c_str());
    }
    return 0;
  }

  // 1. Rank 0 reads the file; everyone parses the same text and reaches the same verdict.
  std::string text, read_error;
  if (rank == 0) {
    try {
      text = read_config_file(cli.config_path);
    } catch (const cfg::ConfigError& e) {
      read_error = e.what();
    }
  }
  broadcast_string(read_error, world);
  if (!read_error.empty()) {
    if (rank == 0) std::fprintf(stderr, "ringbench: invalid config: %s\n", read_error.c_str());
    return 1;
  }
  broadcast_string(text, world);

  Comm node_comm;
  const RankLayout layout = discover_rank_layout(world, &node_comm);
  int gpus = visible_gpu_count(), min_gpus = 0;
  MPI_Allreduce(&gpus, &min_gpus, 1, MPI_INT, MPI_MIN, world);

  Validated v;
  std::string config_error;
  try {
    v = validate(text, cli.config_path, cli, layout, min_gpus);
  } catch (const cfg::ConfigError& e) {
    config_error = e.what();
  } catch (const std::exception& e) {
    config_error = cli.config_path + ": " + e.what();
  }
  if (any_rank(!config_error.empty(), world)) {
    // Rank 0's message when it has one; otherwise the lowest rank that failed reports.
    int mine = config_error.empty() ? size : rank, first = 0;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, world);
    if (rank == first) std::fprintf(stderr, "ringbench: invalid config: %s\n", config_error.c_str());
    return 1;
  }

  if (cli.dry_run) {
    if (rank == 0) {
      std::printf("ringbench %s: %s is valid\n", kVersion, cli.config_path.c_str());
      std::printf("ranks %d, nodes %d, backend %s, binding %s\n", size, layout.node_count,
                  to_string(v.backend), to_string(v.config.binding.policy));
      if (!v.plan_note.empty()) std::printf("note: %s\n", v.plan_note.c_str());
      std::uint64_t total_bytes = 0;
      std::size_t total_points = 0;
      for (const auto& s : v.sweeps) {
        const auto lines = s->plan();
        std::printf("sweep %s (%s): %zu points, about %s of output\n", s->name().c_str(),
                    s->type().c_str(), lines.size(),
                    human_bytes(static_cast<double>(s->estimated_output_bytes())).c_str());
        for (const auto& l : lines) std::printf("  %s\n", l.c_str());
        total_bytes += s->estimated_output_bytes();
        total_points += lines.size();
      }
      std::printf("total: %zu sweeps, %zu points, about %s of output; nothing was run\n",
                  v.sweeps.size(), total_points, human_bytes(static_cast<double>(total_bytes)).c_str());
    }
    return 0;
  }

  // 2. Binding and GPU. The GPU is chosen first so gpu-near can use its locality.
  std::unique_ptr<GpuContext> gpu_ctx;
  GpuInfo gpu;
  std::string setup_error;
  try {
    if (v.backend == Backend::Cuda) gpu = select_gpu(layout.local_rank);
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  Topology topo = Topology::load_this_machine();
  const std::string cpuset_before = topo.current_cpuset();
  MachineModel machine = gpu.pci_bus_id.empty() ? topo.model() : topo.model_for_gpus({gpu.pci_bus_id});
  const int gpu_slot = gpu.pci_bus_id.empty() ? -1 : 0;  // model_for_gpus lists only our GPU
  const BindingDecision decision = decide_binding(machine, v.config.binding.policy,
                                                  layout.local_rank, layout.local_size, gpu_slot);
  std::string cpuset = cpuset_before;
  std::string membind_warning;
  try {
    if (!decision.pus.empty()) cpuset = topo.apply(decision, &membind_warning);
  } catch (const std::exception& e) {
    setup_error = "binding failed: " + std::string(e.what());
  }
  std::string launcher_warning = launcher_binding_warning(cpuset_before, topo.machine_cpuset(), decision);
  if (!membind_warning.empty())
    launcher_warning += (launcher_warning.empty() ? "" : "; ") + membind_warning;
  if (any_rank(!setup_error.empty(), world)) {
    if (!setup_error.empty()) std::fprintf(stderr, "ringbench: rank %d: %s\n", rank, setup_error.c_str());
    return 1;
  }
  try {
    if (v.backend == Backend::Cuda) gpu_ctx.reset(new GpuContext{gpu, NcclComm(world)});
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  if (any_rank(!setup_error.empty(), world)) {
    if (!setup_error.empty()) std::fprintf(stderr, "ringbench: rank %d: %s\n", rank, setup_error.c_str());
    return 1;
  }
  const int numa = topo.current_numa_node();

  // 3. Header on rank 0, with every rank's placement.
  {
    char line[512];
    std::snprintf(line, sizeof line, "rank %d on %s (node %d, local %d): cpus %s, NUMA %d%s%s%s",
                  rank, layout.hostname.c_str(), layout.node_index, layout.local_rank,
                  cpuset.c_str(), numa, gpu.index >= 0 ? ", GPU " : "",
                  gpu.index >= 0 ? std::to_string(gpu.index).c_str() : "",
                  gpu.index >= 0 ? (" " + gpu.name).c_str() : "");
    const auto lines = gather_strings(line, world);
    const auto warnings = gather_strings(launcher_warning, world);
    if (rank == 0) {
      std::printf("ringbench %s (commit %s): %s\n", kVersion, kGitCommit, cli.config_path.c_str());
      std::printf("ranks %d on %d node(s), backend %s, %d GPU(s) per rank visible, binding %s, "
                  "MPI thread level %s\n",
                  size, layout.node_count, to_string(v.backend), min_gpus,
                  to_string(v.config.binding.policy), MpiEnvironment::thread_level_name(mpi_thread_level));
      const std::size_t shown = std::min<std::size_t>(lines.size(), 16);
      for (std::size_t i = 0; i < shown; ++i) std::printf("  %s\n", lines[i].c_str());
      if (lines.size() > shown) std::printf("  ... %zu more ranks (see /ranks in the output)\n", lines.size() - shown);
      for (std::size_t i = 0; i < warnings.size(); ++i)
        if (!warnings[i].empty()) std::printf("  warning: rank %zu: %s\n", i, warnings[i].c_str());
      std::fflush(stdout);
    }
  }

  // 4. The output file.
  const std::string out_path = cli.output.empty() ? default_output_path(v.config, world) : cli.output;
  h5::File file;
  std::string file_error;
  try {
    file = h5::File::create(out_path, world, cli.force);
  } catch (const std::exception& e) {
    file_error = e.what();
  }
  if (any_rank(!file_error.empty(), world)) {
    if (rank == 0) std::fprintf(stderr, "ringbench: %s\n", file_error.c_str());
    return 1;
  }
  h5::Group root = file.root();
  h5::Group run = root.group("run");
  run.attr("ringbench_version", kVersion);
  run.attr("git_commit", kGitCommit);
  run.attr("config_file", cli.config_path);
  run.attr("config_text", text);
  run.attr("command_line", command_line);
  run.attr("start_time", utc_now_iso8601());
  run.attr("world_size", size);
  run.attr("node_count", layout.node_count);
  run.attr("backend", to_string(v.backend));
  run.attr("mpi_thread_level", MpiEnvironment::thread_level_name(mpi_thread_level));
  run.set_attr("end_time", "");
  run.set_attr("status", "running");
  run.set_attr("failure", "");
  write_ranks_table(root, layout, gpu, cpuset, numa, decision);
  file.flush();
  if (rank == 0) {
    std::printf("writing %s\n", out_path.c_str());
    std::fflush(stdout);
  }

  // 5. Sweeps, in file order; each flushed when it ends so an interrupted run keeps them.
  const PathFactories paths = make_path_factories(v.backend);
  h5::Group sweeps = root.group("sweeps");
  std::string failures;
  for (auto& sweep : v.sweeps) {
    Progress progress(rank, sweep->name(), sweep->plan().size());
    RunContext ctx{v.config, world, layout, v.backend, gpu_ctx.get(), paths, progress};
    h5::Group out = sweeps.group(sweep->name());
    out.attr("type", sweep->type());
    out.set_attr("status", "running");
    SweepOutcome outcome;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      outcome = sweep->run(ctx, out);
    } catch (const std::exception& e) {
      // A sweep that throws on one rank leaves the others inside a collective: the only
      // safe end is MPI_Abort. The file keeps status 'running' and every earlier sweep.
      std::fprintf(stderr, "ringbench: rank %d: sweep '%s' failed: %s; aborting the run "
                           "(completed sweeps are in %s)\n",
                   rank, sweep->name().c_str(), e.what(), out_path.c_str());
      std::fflush(stderr);
      MPI_Abort(world, 1);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool failed = any_rank(!outcome.ok, world);
    // Each rank's own reason; rank 0 collects them for the run's failure text.
    const auto reasons = gather_strings(outcome.ok ? "" : outcome.failure, world);
    std::string sweep_failure;
    for (std::size_t i = 0; i < reasons.size(); ++i)
      if (!reasons[i].empty() && sweep_failure.find(reasons[i]) == std::string::npos)
        sweep_failure += (sweep_failure.empty() ? "" : "; ") + reasons[i];
    out.set_attr("status", failed ? "failed" : "complete");
    out.set_attr("failure", sweep_failure);
    out.attr("wall_time_s", seconds);
    file.flush();
    if (failed) failures += (failures.empty() ? "" : "; ") + sweep->name() + ": " + sweep_failure;
    if (rank == 0) {
      std::printf("[%s] %s in %.1f s%s%s\n", sweep->name().c_str(), failed ? "FAILED" : "done",
                  seconds, failed ? ": " : "", failed ? sweep_failure.c_str() : "");
      std::fflush(stdout);
    }
  }

  run.set_attr("end_time", utc_now_iso8601());
  run.set_attr("status", failures.empty() ? "complete" : "failed");
  run.set_attr("failure", failures);
  file.close();
  if (rank == 0) {
    std::printf("%s: %s\n", failures.empty() ? "complete" : "FAILED", out_path.c_str());
    std::fflush(stdout);
  }
  return failures.empty() ? 0 : 1;
}

}  // namespace rb
