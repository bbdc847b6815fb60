// The run, step by step: read the config (rank 0) -> validate (every rank, same verdict) ->
// bind and pick the GPU -> print the header -> open the output file -> run the sweeps ->
// finish. Each step that can fail on some ranks ends with an agreement (mpi::any_rank), so no
// rank goes on alone into a collective.
#include "app/driver.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <mpi.h>

#include "app/end_record.hpp"
#include "app/estimate.hpp"
#include "app/file_write.hpp"
#include "app/heartbeat.hpp"
#include "app/interrupts.hpp"
#include "app/json_report.hpp"
#include "app/paths.hpp"
#include "app/plan.hpp"
#include "app/policies.hpp"
#include "app/progress.hpp"
#include "app/provenance.hpp"
#include "app/registry.hpp"
#include "app/run_summary.hpp"
#include "app/watchdog.hpp"
#include "config/bytes.hpp"
#include "config/config.hpp"
#include "config/file_kind.hpp"
#include "metrics/h5.hpp"
#include "ringbench/version.hpp"
#include "profiling/groups.hpp"
#include "runtime/binding.hpp"
#include "runtime/gpu.hpp"
#include "runtime/host_load.hpp"
#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"
#include "sweeps/collectives.hpp"
#include "sweeps/compute.hpp"
#include "sweeps/memory.hpp"
#include "sweeps/oom_point.hpp"

extern char** environ;

namespace rb {
namespace {

std::string utc_now(const char* strftime_format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, strftime_format, &tm);
  return buf;
}

std::string utc_now_iso8601() {
  return utc_now("%Y-%m-%dT%H:%M:%SZ");
}

// True on every rank when any rank has an error; the lowest such rank prints it once.
bool first_error_reported(const std::string& error, const char* prefix, MPI_Comm world) {
  if (!mpi::any_rank(!error.empty(), world)) return false;
  if (mpi::first_rank_with(!error.empty(), world) == mpi::rank_of(world))
    fmt::print(stderr, "ringbench: {}{}\n", prefix, error);
  return true;
}

// True on every rank when any rank has an error; each such rank prints its own.
bool rank_errors_reported(const std::string& error, MPI_Comm world) {
  if (!error.empty()) fmt::print(stderr, "ringbench: rank {}: {}\n", mpi::rank_of(world), error);
  return mpi::any_rank(!error.empty(), world);
}

// ---------------------------------------------------------------- 1. read and validate

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

struct Validated {
  Config config;
  Backend backend = Backend::Host;
  std::vector<std::unique_ptr<Sweep>> sweeps;
  std::string plan_note;  // said with a --dry-run plan (e.g. planned for GPUs on a login node)
};

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

std::optional<Validated> validate_everywhere(const std::string& text, const CommandLine& cli,
                                             const RankLayout& layout, int min_gpus, MPI_Comm world,
                                             bool planned = false) {
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
                         std::string where = "") {
  if (where.empty()) where = layout_text(layout);
  return print_plan({v.sweeps, where, layout.world_size, v.backend,
                     to_string(v.config.binding.policy), v.plan_note, &v.config.run},
                    cli);
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

// ---------------------------------------------------------------- 2. binding and GPU

struct RankSetup {
  GpuInfo gpu;
  std::string cpuset;
  int numa = -1;
  BindingDecision decision;
  std::string warning;  // the launcher had bound the rank elsewhere, or memory binding failed
  std::unique_ptr<GpuContext> gpu_ctx;
};

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

// ---------------------------------------------------------------- 3. header

void print_rank_warnings(const std::vector<std::string>& warnings) {
  for (std::size_t i = 0; i < warnings.size(); ++i)
    if (!warnings[i].empty())
      fmt::print(stderr, "ringbench: warning: rank {}: {}\n", i, warnings[i]);
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

// ---------------------------------------------------------------- 4. the output file

std::string output_path(const CommandLine& cli, const Config& c, MPI_Comm world) {
  if (!cli.output.empty()) return cli.output;
  // One timestamp for all ranks (rank 0's), so every rank opens the same file.
  std::string stamp = utc_now("%Y%m%dT%H%M%SZ");
  mpi::broadcast_string(stamp, world);
  return fmt::format("{}/{}_{}.h5", c.run.output_dir.empty() ? "." : c.run.output_dir, c.run.name,
                     stamp);
}

// The config file is passed so that an --output naming it is refused (even with --force).
std::optional<h5::File> open_output(const std::string& path, bool force,
                                    const std::string& config_path, const RunSection& run,
                                    MPI_Comm world) {
  std::string error;
  h5::File file;
  try {
    h5::IoHints hints;
    hints.mpiio = run.mpiio_hints;
    hints.alignment_bytes = run.alignment_bytes;
    file = h5::File::create(path, world, force, config_path, hints);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (first_error_reported(error, "", world)) return std::nullopt;
  return file;
}

// --json names a file rank 0 replaces after every sweep: a path it may not replace (a FIFO, a
// device, a link without --force) is refused before the output is claimed, not warned about
// after every sweep of a run that then has no JSON.
bool json_path_refused(const CommandLine& cli, MPI_Comm world) {
  std::string error;
  if (!cli.json.empty() && cli.json != "-" && mpi::rank_of(world) == 0) {
    error = refusal_to_replace(cli.json, cli.force, "--json file");
    if (!error.empty() && cfg::kind_at(cli.json) == "a symbolic link")
      error += " (or pass --force to replace the link itself, never its target)";
  }
  return first_error_reported(error, "", world);
}

// Rank 0 locks the output for the whole run (OutputLock: a second run on it is refused while
// this one is alive); its refusal is every rank's.
bool output_lock_refused(const std::string& path, std::unique_ptr<OutputLock>& lock,
                         MPI_Comm world) {
  std::string error;
  if (mpi::rank_of(world) == 0) {
    try {
      lock = std::make_unique<OutputLock>(path);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  return first_error_reported(error, "", world);
}

// Rank 0, holding the output's lock, before the output is claimed: the names of the files the
// run makes beside it must hold nothing, or a regular file (an earlier run's); a link, FIFO,
// device, socket or directory there is someone else's, and the run refuses to start (rather
// than run without the hang guard's heartbeat). The end record an earlier run on this output
// left (app/end_record.hpp) is removed, so that a record always speaks of the file beside it.
bool side_files_refused(const std::string& out_path, bool heartbeat, MPI_Comm world) {
  std::string error;
  if (mpi::rank_of(world) == 0 && heartbeat)
    error = refusal_to_replace(out_path + ".heartbeat", false, "heartbeat file");
  if (mpi::rank_of(world) == 0 && error.empty())
    error = remove_end_record(end_record_path(out_path));
  return first_error_reported(error, "", world);
}

// SIGTERM, SIGINT and SIGUSR1 end the run through the guard's one decision (Watchdog::interrupt);
// without a watch (no pipe), they keep their default action: the process ends, nothing recorded.
std::unique_ptr<SignalWatch> watch_signals(Watchdog& watchdog, int rank) {
  try {
    return std::make_unique<SignalWatch>([&watchdog](int signo) { watchdog.interrupt(signo); });
  } catch (const std::exception& e) {
    fmt::print(stderr, "ringbench: warning: rank {}: {}\n", rank, e.what());
    return nullptr;
  }
}

// /run/mpiio_hints: the hints MPI-IO reports in effect on the output file (the config's
// run.mpiio_hints it kept, and its own defaults), one string attribute each.
void write_mpiio_hints(h5::Group& run, const h5::File& file, MPI_Comm world) {
  // Rank 0's list for everyone: attr() is collective, so every rank writes the same keys.
  std::string text;
  for (const auto& [key, value] : file.mpiio_hints_in_effect()) text += key + '\n' + value + '\n';
  mpi::broadcast_string(text, world);
  h5::Group g = run.group("mpiio_hints");
  std::istringstream lines(text);
  std::string key, value;
  while (std::getline(lines, key) && std::getline(lines, value)) g.attr(key, value);
}

void write_run_group(h5::Group& run, const Validated& v, const CommandLine& cli,
                     const std::string& text, const RankLayout& layout, int mpi_thread_level) {
  run.attr("ringbench_version", kVersion);
  run.attr("git_commit", kGitCommit);
  run.attr("config_file", cli.config_path);
  run.attr("config_text", text);
  run.attr("command_line", cli.command_line);
  run.attr("start_time", utc_now_iso8601());
  run.attr("world_size", layout.world_size);
  run.attr("node_count", layout.node_count);
  run.attr("simulated_ranks_per_node", layout.simulated.ranks_per_node);
  run.attr("simulated_placement",
           layout.simulated.active() ? to_string(layout.simulated.placement) : "none");
  run.attr("backend", to_string(v.backend));
  run.attr("mpi_thread_level", MpiEnvironment::thread_level_name(mpi_thread_level));
  write_run_provenance(run);
  run.set_attr("end_time", "");
  run.set_attr("status", "running");
  run.set_attr("failure", "");
}

// Every /ranks dataset says which rank a row is (role key) except the clocks (role metric).
void write_ranks_table(h5::Group& root, const RankLayout& layout, const RankSetup& s) {
  h5::Group ranks = root.group("ranks");
  auto key = [](const char* units, const char* description) {
    return h5::Meta{units, description, "key"};
  };
  auto id = [](int v) { return static_cast<std::int64_t>(v); };
  ranks.write_per_rank("rank", id(layout.rank), key("1", "MPI rank in MPI_COMM_WORLD"));
  ranks.write_per_rank_string("hostname", layout.hostname, key("1", "host the rank ran on"));
  ranks.write_per_rank("node_index", id(layout.node_index),
                       key("1",
                           "node index, ordered by the lowest rank on each node "
                           "(simulated nodes with --ranks-per-node)"));
  ranks.write_per_rank("local_rank", id(layout.local_rank),
                       key("1", "rank within its node (from MPI_Comm_split_type shared)"));
  ranks.write_per_rank("gpu_index", id(s.gpu.index),
                       key("1", "CUDA device ordinal the rank drove; -1 on the host path"));
  ranks.write_per_rank_string("gpu_name", s.gpu.name, key("1", "GPU product name; empty on host"));
  ranks.write_per_rank_string(
      "gpu_arch", s.gpu.arch,
      key("1", "GPU compute capability major.minor (9.0: Hopper); empty on host"));
  ranks.write_per_rank_string("gpu_uuid", s.gpu.uuid, key("1", "GPU UUID; empty on host"));
  ranks.write_per_rank_string("gpu_pci_bus_id", s.gpu.pci_bus_id,
                              key("1", "GPU PCI bus id; empty on host"));
  ranks.write_per_rank_string("cpuset", s.cpuset,
                              key("1",
                                  "effective CPU binding (PU list) "
                                  "after ringbench applied its policy"));
  ranks.write_per_rank("numa_node", id(s.numa),
                       key("1", "NUMA node covering the cpuset; -1 when several or unknown"));
  ranks.write_per_rank_string("binding_policy", to_string(s.decision.policy),
                              key("1", "binding policy from the config"));
  ranks.write_per_rank_string("binding_explanation", s.decision.explanation,
                              key("1", "why this binding was chosen"));
  write_rank_clocks(ranks, s.gpu);
  // /ranks/rank is the rank axis of every /ranks dataset: xarray and netCDF readers name it.
  ranks.mark_scale("rank");
  for (const std::string& name : ranks.dataset_names())
    if (name != "rank") ranks.attach_scales(name, {"rank"});
}

// ---------------------------------------------------------------- 5. sweeps

// A --json file that cannot be written costs the run nothing but a warning.
void write_json(const JsonReport& json, const std::string& status, const std::string& failure) {
  try {
    json.write(status, failure);
  } catch (const std::exception& e) {
    fmt::print(stderr, "ringbench: warning: {}\n", e.what());
  }
}

// A write or flush of the output failed: metrics/h5 agreed on it over the ranks, so every rank
// holds the same message (with the OS's reason) and stops here; the file keeps what its last good
// flush wrote. MPI_Abort, not a return: the ranks may be at different points of a sweep.
[[noreturn]] void stop_on_output_error(const std::exception& e, const std::string& where,
                                       const std::string& path, int rank, JsonReport* json,
                                       MPI_Comm world) {
  fmt::print(stderr, "ringbench: rank {}: writing {} to {} failed: {}; stopping the run\n", rank,
             where, path, e.what());
  std::fflush(stderr);
  if (json != nullptr) write_json(*json, "failed", where + ": " + e.what());
  MPI_Abort(world, 1);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

// Rank 0's --json report (null elsewhere or without --json): the header is what /run records.
std::unique_ptr<JsonReport> make_json_report(const CommandLine& cli, const Validated& v,
                                             const RankLayout& layout,
                                             const std::string& out_path) {
  if (cli.json.empty() || layout.rank != 0) return nullptr;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> h = {
      {"format", json_string("ringbench-results-1")},
      {"ringbench_version", json_string(kVersion)},
      {"git_commit", json_string(kGitCommit)},
      {"command_line", json_string(cli.command_line)},
      {"config_file", json_string(cli.config_path)},
      {"output_file", json_string(out_path)},
      {"start_time", json_string(utc_now_iso8601())},
      {"world_size", std::to_string(layout.world_size)},
      {"node_count", std::to_string(layout.node_count)},
      {"backend", json_string(to_string(v.backend))},
      {"libraries", json_object(library_versions())},
      {"environment", json_object(result_environment(environ))}};
  auto json = std::make_unique<JsonReport>(cli.json, std::move(h), cli.force);
  write_json(*json, "running", "");
  return json;
}

// The hang guard decided to end the run (Watchdog::fired) while this rank's main thread went
// on (a slow point, not a hung one): the guard's exit is the run's end, so nothing more is
// written or said. A rank whose guard fired waits for it to end the process; the others wait
// for the launcher to end them when it does, at most a while, then end with its exit code.
[[noreturn]] void await_guard_exit(bool fired_here) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::seconds(fired_here ? 60 : 20));
  std::_Exit(kTimeoutExitCode);
}

// Called where every rank's main thread is outside any collective (after a sweep, at the end):
// whether any rank's guard fired is agreed, so no rank writes 'complete' once one has.
void stop_if_guard_fired(Watchdog* watchdog, MPI_Comm world) {
  if (watchdog != nullptr && mpi::any_rank(watchdog->fired(), world))
    await_guard_exit(watchdog->fired());
}

// Runs one sweep on every rank; returns "" or the failure text (the same on every rank).
std::string run_sweep(Sweep& sweep, RunContext ctx, h5::Group& sweeps, h5::File& file, bool quiet,
                      JsonReport* json, Watchdog* watchdog) {
  const MPI_Comm world = ctx.world;
  h5::Group out = sweeps.group(sweep.name());
  out.attr("type", sweep.type());
  out.set_attr("status", "running");
  SweepOutcome outcome;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    outcome = sweep.run(ctx, out);
  } catch (const std::exception& e) {
    // A sweep that throws on one rank leaves the others inside a collective: the only
    // safe end is MPI_Abort. The file keeps status 'running' and every earlier sweep.
    fmt::print(stderr,
               "ringbench: rank {}: sweep '{}' failed: {}; aborting the run (completed "
               "sweeps are in {})\n",
               ctx.layout.rank, sweep.name(), e.what(), file.path());
    std::fflush(stderr);
    if (json != nullptr) write_json(*json, "failed", sweep.name() + ": " + e.what());
    MPI_Abort(world, 1);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (watchdog != nullptr) watchdog->idle();  // the points are over; the run's limit still counts
  stop_if_guard_fired(watchdog, world);
  const bool failed = mpi::any_rank(!outcome.ok, world);
  // Each rank's own reason, once each, joined in rank order.
  std::string failure;
  for (const auto& reason : mpi::gather_strings(outcome.ok ? "" : outcome.failure, world))
    if (!reason.empty() && failure.find(reason) == std::string::npos)
      failure += (failure.empty() ? "" : "; ") + reason;
  if (failed && failure.empty()) failure = "failed";
  // The sweep's data reaches the disk before its status says complete: a flush that fails
  // leaves it 'running' in the file.
  try {
    file.flush();
    out.set_attr("status", failed ? "failed" : "complete");
    out.set_attr("failure", failure);
    out.attr("wall_time_s", seconds);
    file.flush();
  } catch (const std::exception& e) {
    stop_on_output_error(e, "sweep '" + sweep.name() + "'", file.path(), ctx.layout.rank, json,
                         world);
  }
  if (ctx.layout.rank == 0 && (failed || !quiet))  // a progress line (the summary repeats failures)
    fmt::print(stderr, "{} [{}] {} in {}{}\n", utc_clock(), sweep.name(),
               failed ? "FAILED" : "done", duration_text(seconds), failed ? ": " + failure : "");
  if (json != nullptr) {
    json->sweep_done(failed ? "failed" : "complete", failure, seconds);
    write_json(*json, "running", "");
  }
  return failed ? failure : "";
}

// What the run tells besides the file: where it prints, the --json document (rank 0; null
// without --json), and the summary the sweeps' records fill (rank 0).
struct Reports {
  Screen screen;
  JsonReport* json = nullptr;
  RunSummary summary;
};

Screen screen_of(const CommandLine& cli) {
  Screen s;
  s.quiet = cli.quiet;
  s.table_width = cli.wide ? 0 : h5::kTerminalWidth;
  s.results = cli.json == "-" ? stderr : stdout;  // stdout carries the JSON document alone
  return s;
}

// Every sweep in file order, each flushed when it ends so an interrupted run keeps them.
// The hang guard watches every point (Progress tells it); time between sweeps counts only
// toward the run's limit.
std::string run_sweeps(Validated& v, const RankLayout& layout, RankSetup& s, h5::Group& root,
                       h5::File& file, Watchdog* watchdog, Reports& reports, MPI_Comm world) {
  JsonReport* json = reports.json;
  const PathFactories paths = make_path_factories(v.backend);
  h5::Group sweeps = root.group("sweeps");
  // The run's ETA weighs the sweeps by the dry-run's cost model, which also sets each sweep's
  // point limit under run.point_timeout_s: auto.
  const std::vector<double> estimates = model_estimates(v.sweeps, cost_assumptions(v.backend));
  const RunProgress run(estimates, reports.screen,
                        [&](std::size_t i, std::vector<h5::PointRecord> r) {
                          reports.summary.add(v.sweeps[i]->name(), r);
                          if (json != nullptr)
                            json->add_sweep(v.sweeps[i]->name(), v.sweeps[i]->type(), std::move(r));
                        });
  std::string failures;
  // Group communicators (MPI, and NCCL on the cuda backend) made once and reused by every sweep
  // that asks for the same members; destroyed here, before the world NCCL communicator.
  groups::GroupCache group_cache;
  for (std::size_t i = 0; i < v.sweeps.size(); ++i) {
    Sweep& sweep = *v.sweeps[i];
    if (watchdog != nullptr && v.config.run.point_timeout_auto) {
      const double limit = auto_point_timeout_s(estimates[i]);
      watchdog->set_point_limit(
          limit, fmt::format("run.point_timeout_s: auto, {:g} x the sweep's estimate "
                             "of {:.0f} s, at least {:g} s; set a number or off",
                             kAutoPointFactor, estimates[i], kAutoPointFloorS));
    }
    Progress progress(layout.rank, sweep.name(), sweep.point_count());
    progress.watch(watchdog);
    progress.in_run(&run, i);
    const RunContext ctx{v.config,        world, layout,   v.backend,
                         s.gpu_ctx.get(), paths, progress, &group_cache};
    const std::string failure =
        run_sweep(sweep, ctx, sweeps, file, reports.screen.quiet, json, watchdog);
    if (!failure.empty())
      failures += (failures.empty() ? "" : "; ") + sweep.name() + ": " + failure;
  }
  return failures;
}

// The hang guard's heartbeat (app/heartbeat.hpp says how it scales): rank 0 creates the
// shared file beside the output, then every rank maps its node's shared memory and starts
// beating. Without it the guard still stops the run, it only cannot name a silent rank, so a
// failure is a warning. Returns the path rank 0 created ("" elsewhere, and when it created
// none): the one file the run's end removes.
std::string start_heartbeats(Watchdog& watchdog, const std::string& out_path, MPI_Comm node,
                             MPI_Comm world) {
  const std::string path = out_path + ".heartbeat";
  std::string error;
  bool created = false;
  if (mpi::rank_of(world) == 0) {
    try {  // a new empty file; one left by a stopped run is replaced, nothing else is
      write_file_replacing(path, "", false, "heartbeat file");
      created = true;
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!mpi::any_rank(!error.empty(), world))
    error = watchdog.start_heartbeat(std::make_unique<NodeHeartbeat>(path, world, node));
  if (!error.empty())
    fmt::print(stderr,
               "ringbench: warning: rank {}: the hang guard cannot name a stopped rank: "
               "{}\n",
               mpi::rank_of(world), error);
  return created ? path : "";
}

// run.timeout_s and run.point_timeout_s; --timeout overrides the run's limit.
WatchdogLimits watchdog_limits(const CommandLine& cli, const Config& config) {
  WatchdogLimits limits;
  limits.run_s = config.run.timeout_s;
  limits.point_s = config.run.point_timeout_s;
  limits.point_auto = config.run.point_timeout_auto;
  if (cli.timeout_s > 0) {
    limits.run_s = cli.timeout_s;
    limits.run_source = "--timeout";
  }
  return limits;
}

}  // namespace

int run_ringbench(const CommandLine& cli, int mpi_thread_level) {
  const MPI_Comm world = MPI_COMM_WORLD;
  const std::optional<std::string> text = read_config(cli.config_path, world);
  if (!text) return 1;
  if (cli.world_size > 0) return plan_without_launcher(cli, *text, world);

  Comm node_comm;
  const RankLayout layout = cli.simulated.active()
                                ? discover_rank_layout(world, cli.simulated, &node_comm)
                                : discover_rank_layout(world, &node_comm);
  int gpus = visible_gpu_count(), min_gpus = 0;
  MPI_Allreduce(&gpus, &min_gpus, 1, MPI_INT, MPI_MIN, world);

  std::optional<Validated> v = validate_everywhere(*text, cli, layout, min_gpus, world);
  if (!v) return 1;
  if (cli.dry_run) {
    const int code = layout.rank == 0 ? print_validated_plan(*v, cli, layout) : 0;
    return mpi::any_rank(code != 0, world) ? 2 : 0;
  }

  // Started before the GPU setup: a hung NCCL initialisation counts toward the run's limit.
  // Always there, limits or not: a signal ends the run through its one decision too.
  const WatchdogLimits limits = watchdog_limits(cli, v->config);
  const auto watchdog = std::make_unique<Watchdog>(layout.rank, limits);
  const std::unique_ptr<SignalWatch> signals = watch_signals(*watchdog, layout.rank);

  std::optional<RankSetup> setup = set_up_rank(*v, layout, world);
  if (!setup) return 1;
  Reports reports;
  reports.screen = screen_of(cli);
  print_header(*v, cli, layout, *setup, min_gpus, mpi_thread_level, reports.screen, world);
  if (!decide_policies(v->sweeps, v->backend, setup->gpu, cli.quiet, world)) return 1;

  const std::string out_path = output_path(cli, v->config, world);
  if (json_path_refused(cli, world)) return 1;
  std::unique_ptr<OutputLock> lock;  // rank 0's, released when the run returns (after the file)
  if (output_lock_refused(out_path, lock, world)) return 1;
  if (side_files_refused(out_path, limits.any(), world)) return 1;
  struct stat before {};
  const bool new_output = ::lstat(out_path.c_str(), &before) != 0;  // rank 0's view is the one used
  std::optional<h5::File> file =
      open_output(out_path, cli.force, cli.config_path, v->config.run, world);
  if (!file) return 1;
  h5::Group root = file->root();
  h5::Group run = root.group("run");
  try {
    write_run_group(run, *v, cli, *text, layout, mpi_thread_level);
    write_mpiio_hints(run, *file, world);
    write_ranks_table(root, layout, *setup);
    file->flush();
  } catch (const std::exception& e) {
    // A file whose first flush failed (a full disk) holds no readable HDF5 and would refuse
    // the next run's claim: rank 0 removes the one this run made (we hold its lock). An older
    // file that --force was to replace is left alone (the new data went to a temporary name).
    if (layout.rank == 0 && new_output && ::unlink(out_path.c_str()) == 0)
      fmt::print(stderr, "ringbench: removed the unfinished output '{}'\n", out_path);
    stop_on_output_error(e, "the run and ranks groups", out_path, layout.rank, nullptr, world);
  }
  if (layout.rank == 0 && !cli.quiet) fmt::print(stderr, "writing {}\n", out_path);
  watchdog->set_end_record(end_record_path(out_path));
  const std::string heartbeat =
      limits.any() ? start_heartbeats(*watchdog, out_path, node_comm.get(), world) : "";

  const std::unique_ptr<JsonReport> json = make_json_report(cli, *v, layout, out_path);
  reports.json = json.get();
  const CpuUsage cpu_at_start = cpu_usage_now();
  const auto sweeps_start = std::chrono::steady_clock::now();
  const std::string failures =
      run_sweeps(*v, layout, *setup, root, *file, watchdog.get(), reports, world);
  const double sweeps_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sweeps_start).count();
  const double foreign_cpu = foreign_cpu_fraction(cpu_at_start, world);
  stop_if_guard_fired(watchdog.get(), world);
  if (!watchdog->end_run()) await_guard_exit(true);  // it fired since: its end
  try {
    run.attr("foreign_cpu_fraction", foreign_cpu);
    run.set_attr("end_time", utc_now_iso8601());
    run.set_attr("status", failures.empty() ? "complete" : "failed");
    run.set_attr("failure", failures);
    file->close();
  } catch (const std::exception& e) {
    stop_on_output_error(e, "the run's end status", out_path, layout.rank, json.get(), world);
  }
  if (limits.any()) watchdog->release_heartbeat();  // every rank is here (a collective)
  if (!heartbeat.empty() && layout.rank == 0) ::unlink(heartbeat.c_str());
  if (json != nullptr) write_json(*json, failures.empty() ? "complete" : "failed", failures);
  if (layout.rank == 0) {
    fmt::print(reports.screen.results, "{}{}", cli.quiet ? "" : "\n",
               reports.summary.text(out_path, failures, v->sweeps.size(), sweeps_s, cli.quiet));
    std::fflush(reports.screen.results);
  }
  return failures.empty() ? 0 : 1;
}

}  // namespace rb
