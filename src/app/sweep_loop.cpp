#include "app/sweep_loop.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "app/estimate.hpp"
#include "app/interrupts.hpp"
#include "app/paths.hpp"
#include "app/provenance.hpp"
#include "app/run_end.hpp"
#include "profiling/groups.hpp"
#include "ringbench/version.hpp"
#include "runtime/mpi_util.hpp"

extern char** environ;

namespace rb {
namespace {

// Runs the sweep's points; a sweep that throws on one rank aborts the run.
SweepOutcome run_points(Sweep& sweep, RunContext& ctx, h5::Group& out, h5::File& file,
                        JsonReport* json) {
  try {
    return sweep.run(ctx, out);
  } catch (const std::exception& e) {
    // A sweep that throws on one rank leaves the others inside a collective: the only
    // safe end is MPI_Abort. The file keeps status 'running' and every earlier sweep (a --force
    // run's file goes: abort_run; the old one stays).
    fmt::print(stderr, "ringbench: rank {}: sweep '{}' failed: {}; aborting the run{}\n",
               ctx.layout.rank, sweep.name(), e.what(),
               file.pending().empty() ? " (completed sweeps are in " + file.path() + ")" : "");
    if (json != nullptr) write_json(*json, "failed", sweep.name() + ": " + e.what());
    abort_run(file, ctx.layout.rank, ctx.world);
  }
}

// Each rank's own reason, once each, joined in rank order ("" when every rank's outcome is ok).
std::string agreed_failure(const SweepOutcome& outcome, MPI_Comm world) {
  const bool failed = mpi::any_rank(!outcome.ok, world);
  std::string failure;
  for (const auto& reason : mpi::gather_strings(outcome.ok ? "" : outcome.failure, world))
    if (!reason.empty() && failure.find(reason) == std::string::npos)
      failure += (failure.empty() ? "" : "; ") + reason;
  return failed && failure.empty() ? "failed" : failure;
}

// The sweep's data reaches the disk before its status says how it ended: a flush that fails
// leaves it 'running' in the file.
void write_sweep_end(h5::Group& out, h5::File& file, const std::string& status,
                     const std::string& failure, double seconds, const Progress& progress,
                     const std::string& name, int rank, JsonReport* json, MPI_Comm world) {
  try {
    file.flush();
    out.set_attr("status", status);
    out.set_attr("failure", failure);
    out.attr("wall_time_s", seconds);
    if (status == "interrupted")
      out.attr("points_planned", static_cast<std::int64_t>(progress.total_points()));
    file.flush();
  } catch (const std::exception& e) {
    stop_on_output_error(e, "sweep '" + name + "'", file, rank, json, world);
  }
}

// Runs one sweep on every rank; returns how it ended (the same on every rank).
SweepEnd run_sweep(Sweep& sweep, RunContext ctx, Progress& progress, h5::Group& sweeps,
                   h5::File& file, bool quiet, JsonReport* json, Watchdog* watchdog) {
  const MPI_Comm world = ctx.world;
  h5::Group out = sweeps.group(sweep.name());
  out.attr("type", sweep.type());
  out.set_attr("status", "running");
  const bool stops = watchdog != nullptr && sweep.stops_between_points();
  if (stops) progress.stop_on_signal(world);
  if (watchdog != nullptr) watchdog->stop_at_points(stops);
  const auto t0 = std::chrono::steady_clock::now();
  const SweepOutcome outcome = run_points(sweep, ctx, out, file, json);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (watchdog != nullptr) watchdog->idle();  // the points are over; the run's limit still counts
  stop_if_guard_fired(watchdog, world);
  SweepEnd end;
  end.failure = agreed_failure(outcome, world);
  // Stopped between two points, or a signal since the last point's start: the run ends here.
  end.signal = progress.stopped_by();
  end.cut_short = end.signal != 0;
  if (!end.cut_short && stops) end.signal = agreed_stop_signal(*watchdog, world);
  // The sweep's failure attribute says the signal too; the run's failures only what failed.
  std::string failure = end.failure;
  if (end.cut_short)
    failure += (failure.empty() ? "" : "; ") +
               fmt::format("{}: stopped after {} of {} points", signal_name(end.signal),
                           progress.stopped_before(), progress.total_points());
  const std::string status =
      end.cut_short ? "interrupted" : (failure.empty() ? "complete" : "failed");
  write_sweep_end(out, file, status, failure, seconds, progress, sweep.name(), ctx.layout.rank,
                  json, world);
  const bool said = status != "complete";
  if (ctx.layout.rank == 0 && (said || !quiet))  // a progress line (the summary repeats failures)
    fmt::print(stderr, "{} [{}] {} in {}{}\n", utc_clock(), sweep.name(),
               end.cut_short ? "STOPPED" : (said ? "FAILED" : "done"), duration_text(seconds),
               said ? ": " + failure : "");
  if (json != nullptr) {
    json->sweep_done(status, failure, seconds);
    write_json(*json, "running", "");
  }
  return end;
}

}  // namespace

Screen screen_of(const CommandLine& cli) {
  Screen s;
  s.quiet = cli.quiet;
  s.table_width = cli.wide ? 0 : h5::kTerminalWidth;
  s.results = cli.json == "-" ? stderr : stdout;  // stdout carries the JSON document alone
  return s;
}

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

SweepsEnd run_sweeps(Validated& v, const RankLayout& layout, RankSetup& s, h5::Group& root,
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
  SweepsEnd end;
  // Group communicators (MPI, and NCCL on the cuda backend) made once and reused by every sweep
  // that asks for the same members; destroyed here, before the world NCCL communicator.
  groups::GroupCache group_cache;
  for (std::size_t i = 0; i < v.sweeps.size() && end.signal == 0; ++i) {
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
    const SweepEnd one =
        run_sweep(sweep, ctx, progress, sweeps, file, reports.screen.quiet, json, watchdog);
    ++end.ran;
    if (!one.failure.empty())
      end.failures += (end.failures.empty() ? "" : "; ") + sweep.name() + ": " + one.failure;
    end.signal = one.signal;
    if (one.signal != 0)
      end.interruption =
          one.cut_short ? fmt::format("{} during sweep {}: stopped after {} of {} points",
                                      signal_name(one.signal), sweep.name(),
                                      progress.stopped_before(), progress.total_points())
                        : fmt::format("{} after sweep {}", signal_name(one.signal), sweep.name());
  }
  // No point boundary comes any more: a signal from here ends the run at once.
  if (watchdog != nullptr) watchdog->stop_at_points(false);
  return end;
}

}  // namespace rb
