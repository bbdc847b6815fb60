#pragma once
// The sweeps, one after another, each written and flushed when it ends; and what the run tells
// besides the file while they run (the screen, the --json document, the summary's records).
#include <memory>
#include <string>

#include <mpi.h>

#include "app/cli.hpp"
#include "app/json_report.hpp"
#include "app/progress.hpp"
#include "app/rank_setup.hpp"
#include "app/run_summary.hpp"
#include "app/validation.hpp"
#include "app/watchdog.hpp"
#include "metrics/h5.hpp"

namespace rb {

// What the run tells besides the file: where it prints, the --json document (rank 0; null
// without --json), and the summary the sweeps' records fill (rank 0).
struct Reports {
  Screen screen;
  JsonReport* json = nullptr;
  RunSummary summary;
};

// Where the run prints (--quiet, --wide; --json - moves the results to stderr).
Screen screen_of(const CommandLine& cli);

// Rank 0's --json report (null elsewhere or without --json): the header is what /run records.
std::unique_ptr<JsonReport> make_json_report(const CommandLine& cli, const Validated& v,
                                             const RankLayout& layout, const std::string& out_path);

// How one sweep ended (the same on every rank): its failure ("" when none; a signal is none),
// and the signal the ranks agreed to stop the run for (0: none), between two of its points
// (cut_short: the sweep is 'interrupted', its finished points written) or after its last.
struct SweepEnd {
  std::string failure;
  int signal = 0;
  bool cut_short = false;
};

// How the sweeps ended: the failures, "sweep: reason; ..." ("" when none), and the signal that
// stopped the run with where ("SIGTERM during sweep S: stopped after K of N points").
struct SweepsEnd {
  std::string failures;
  int signal = 0;
  std::string interruption;
  std::size_t ran = 0;  // the sweeps that ran, fewer than the config's after a signal
};

// Every sweep in file order, each flushed when it ends so an interrupted run keeps them. The
// hang guard watches every point (Progress tells it); time between sweeps counts only toward the
// run's limit. A signal stops the run at the next point's start (or a sweep's end), where the
// ranks agree on it: the sweep writes its finished points and no later sweep runs.
SweepsEnd run_sweeps(Validated& v, const RankLayout& layout, RankSetup& s, h5::Group& root,
                     h5::File& file, Watchdog* watchdog, Reports& reports, MPI_Comm world);

}  // namespace rb
