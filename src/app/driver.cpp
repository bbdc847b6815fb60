// The run, step by step: read the config (rank 0) -> validate (every rank, same verdict) ->
// bind and pick the GPU -> print the header -> open the output file -> run the sweeps ->
// finish. Each step that can fail on some ranks ends with an agreement (mpi::any_rank), so no
// rank goes on alone into a collective.
#include "app/driver.hpp"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <mpi.h>

#include "app/end_record.hpp"
#include "app/file_write.hpp"
#include "app/interrupts.hpp"
#include "app/json_report.hpp"
#include "app/output_file.hpp"
#include "app/policies.hpp"
#include "app/rank_setup.hpp"
#include "app/run_end.hpp"
#include "app/sweep_loop.hpp"
#include "app/validation.hpp"
#include "app/watchdog.hpp"
#include "runtime/gpu.hpp"
#include "runtime/host_load.hpp"
#include "runtime/mpi.hpp"
#include "runtime/mpi_util.hpp"

namespace rb {
namespace {

// The output is claimed and holds /run and /ranks: the sweeps run into it, then the run's end
// (app/run_end.hpp), then rank 0's summary. Returns the exit code.
int run_into_output(const std::string& out_path, h5::File& file, Validated& v,
                    const CommandLine& cli, const RankLayout& layout, RankSetup& setup,
                    Watchdog& watchdog, bool heartbeat, Reports& reports, MPI_Comm node,
                    MPI_Comm world) {
  if (layout.rank == 0 && !cli.quiet) fmt::print(stderr, "writing {}\n", out_path);
  watchdog.set_end_record(end_record_path(out_path));
  RunEnd end;
  end.out_path = out_path;
  end.heartbeat = heartbeat ? start_heartbeats(watchdog, out_path, node, world) : "";
  end.guarded = heartbeat;

  const std::unique_ptr<JsonReport> json = make_json_report(cli, v, layout, out_path);
  reports.json = json.get();
  const CpuUsage cpu_at_start = cpu_usage_now();
  const auto sweeps_start = std::chrono::steady_clock::now();
  h5::Group root = file.root();
  SweepsEnd sweeps = run_sweeps(v, layout, setup, root, file, &watchdog, reports, world);
  end.failures = sweeps.failures;
  end.signal = sweeps.signal;
  end.interruption = sweeps.interruption;
  const double sweeps_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sweeps_start).count();
  end.foreign_cpu = foreign_cpu_fraction(cpu_at_start, world);
  end_run(end, file, watchdog, json.get(), layout.rank, world);
  if (layout.rank == 0) {
    fmt::print(reports.screen.results, "{}{}", cli.quiet ? "" : "\n",
               reports.summary.text(out_path, end.failure(), sweeps.ran, sweeps_s, cli.quiet,
                                    end.status()));
    std::fflush(reports.screen.results);
  }
  return end.exit_code();
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
  std::unique_ptr<OutputLock> lock;  // rank 0's, released when the run returns (after the file)
  if (output_refused(cli, out_path, policy_files(v->config, v->sweeps), limits.any(), lock, world))
    return 1;
  // Held by the lock, a path with nothing there is one only this run can create.
  struct stat before {};
  if (layout.rank == 0 && ::lstat(out_path.c_str(), &before) != 0)
    watchdog->set_unfinished_output(out_path);
  std::optional<h5::File> file =
      create_output(out_path, *v, cli, *text, layout, *setup, mpi_thread_level, world);
  // A --force run's file stays unfinished until the run's end renames it over the old one: a
  // signal before removes it and the old file stays. A new output is readable from here on.
  watchdog->set_unfinished_output(file && layout.rank == 0 ? file->pending() : "");
  if (!file) return 1;
  return run_into_output(out_path, *file, *v, cli, layout, *setup, *watchdog, limits.any(), reports,
                         node_comm.get(), world);
}

}  // namespace rb
