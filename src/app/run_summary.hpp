#pragma once
// The end of a run on the terminal (rank 0): the output file and the run's status, what stood
// out in it (failed sweeps; points that ran out of memory, failed parity or any status but ok;
// wrong data; noisy points, whose iterations vary by more than 5 %), and the command that
// reports the file. Read from the sweeps' headline records, so it needs no second pass over
// the file.
#include <string>
#include <vector>

#include "metrics/table.hpp"

namespace rb {

// rb-analysis flags a number whose iterations have a CV above this as untrustworthy
// (analysis/ringbench_analysis/results.py, CV_LIMIT); the summary uses the same line.
constexpr double kNoisyCv = 0.05;

class RunSummary {
 public:
  // One finished sweep's records (PointsTable::records, rank 0's).
  void add(const std::string& sweep, const std::vector<h5::PointRecord>& records);
  // "complete: FILE", "FAILED: FILE" or, with `status` interrupted (a signal stopped the run),
  // "INTERRUPTED: FILE" (scripts look for that line), then unless `quiet` the sweeps and points,
  // what stood out, and "report: rb-analysis report FILE --out DIR"; every line within
  // h5::kTerminalWidth columns but for a longer file name.
  std::string text(const std::string& path, const std::string& failures, std::size_t sweeps,
                   double seconds, bool quiet, const std::string& status = "") const;

 private:
  // One thing that stood out at one point: its category ("oom", "noisy", ...), where, and a
  // number that orders the examples (the worst first).
  struct Finding {
    std::string category, sweep, point, detail;
    double severity = 0;
  };
  std::vector<Finding> findings_;
  std::size_t points_ = 0;
};

// "results/x_report" for "results/x.h5": where the summary suggests the report goes.
std::string report_dir_for(const std::string& path);

}  // namespace rb
