#pragma once
// --json FILE: the run's results for CI systems and dashboards, no HDF5 needed (the format is
// in docs/user-guide.md). Rank 0 keeps a header (version, commit, arguments, libraries,
// environment, ranks) and each finished sweep's records, and rewrites the whole file after
// every sweep and at the end (written under a new name beside it, then renamed: app/file_write),
// so the file is valid JSON whenever the run stops: "status": "running" there means it stopped
// before its end. --json - writes the document to stdout once, with the run's final status
// (complete or failed; a run the hang guard stops writes none): a pipe gets one document.
#include <string>
#include <utility>
#include <vector>

#include "metrics/table.hpp"

namespace rb {

class JsonReport {
 public:
  // header: (name, JSON value text) pairs, in order, written before "sweeps". replace_link
  // (--force): a symbolic link at `path` is replaced itself (never written through); without
  // it only a regular file there is replaced.
  JsonReport(std::string path, std::vector<std::pair<std::string, std::string>> header,
             bool replace_link = false);
  void add_sweep(const std::string& name, const std::string& type,
                 std::vector<h5::PointRecord> records);
  // Marks the last added sweep complete or failed.
  void sweep_done(const std::string& status, const std::string& failure, double seconds);
  // Rewrites the file; throws std::runtime_error naming the path when it cannot. To stdout
  // (path "-"): only a final status is written, once.
  void write(const std::string& run_status, const std::string& failure) const;
  bool to_stdout() const { return path_ == "-"; }
  // True the first time it is called: write_json warns once, not at every later try.
  bool first_failure() const { return !failed_ ? (failed_ = true) : false; }

 private:
  struct Sweep {
    std::string name, type, status = "running", failure;
    double seconds = 0;
    std::vector<h5::PointRecord> records;
  };
  std::string path_;
  std::vector<std::pair<std::string, std::string>> header_;
  std::vector<Sweep> sweeps_;
  bool replace_link_ = false;
  mutable bool written_to_stdout_ = false;
  mutable bool failed_ = false;
};

// json.write, or a warning on stderr: a --json file that cannot be written costs the run
// nothing more. The file is tried again after every sweep and at the end, so a full disk would
// repeat the warning at each try: it is printed at the first failure only, and says so.
void write_json(const JsonReport& json, const std::string& status, const std::string& failure);

// JSON text of a string (quoted, escaped) and of a number (null for NaN and infinities).
std::string json_string(const std::string& s);
std::string json_number(double v);
// {"k": "v", ...} of string pairs.
std::string json_object(const std::vector<std::pair<std::string, std::string>>& strings);

}  // namespace rb
