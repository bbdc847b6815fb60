// The end-of-run summary (app/run_summary.hpp): the status line scripts look for, what stood out
// in the sweeps' headline records, and the report command.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "app/run_summary.hpp"

namespace {

using rb::h5::OverInner, rb::h5::OverRanks;

rb::h5::PointRecord::Field text_field(const std::string& name, const std::string& text) {
  rb::h5::PointRecord::Field f;
  f.name = name;
  f.is_text = true;
  f.text = text;
  return f;
}

rb::h5::PointRecord::Field number(const std::string& name, double v, OverInner inner,
                                  OverRanks ranks) {
  rb::h5::PointRecord::Field f;
  f.name = name;
  f.number = v;
  f.how = {name, inner, ranks};
  return f;
}

// A point with keys (operation, size), a status, a CV and a wrong-element count.
rb::h5::PointRecord point(const std::string& op, double size, const std::string& status, double cv,
                          double wrong) {
  rb::h5::PointRecord r;
  r.keys.push_back(text_field("operation", op));
  r.keys.push_back(number("size", size, OverInner::None, OverRanks::Max));
  r.metrics.push_back(text_field("status", status));
  r.metrics.push_back(number("iteration_time_s", 0.5, OverInner::Median, OverRanks::Max));
  r.metrics.push_back(number("iteration_time_s", cv, OverInner::Cv, OverRanks::Slowest));
  r.metrics.push_back(number("wrong_elements", wrong, OverInner::None, OverRanks::Sum));
  return r;
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("summary: nothing stood out; --quiet keeps the status line alone") {
  rb::RunSummary s;
  s.add("compute", {point("gemm", 128, "ok", 0.01, 0), point("gemm", 256, "ok", NAN, 0)});
  const std::string text = s.text("results/x.h5", "", 1, 2.5, false);
  CHECK(text.rfind("complete: results/x.h5\n", 0) == 0);
  CHECK(has(text, "  1 sweep(s), 2 point(s) in 2.5 s; nothing stood out"));
  CHECK(has(text, "  report: rb-analysis report results/x.h5 --out results/x_report\n"));
  CHECK(s.text("results/x.h5", "", 1, 2.5, true) == "complete: results/x.h5\n");
}

TEST_CASE("summary: failures, oom, wrong data and noisy points, the worst first") {
  rb::RunSummary s;
  std::vector<rb::h5::PointRecord> recs;
  for (int i = 0; i < 5; ++i) recs.push_back(point("gemm", 100 + i, "ok", 0.06 + 0.01 * i, 0));
  recs.push_back(point("gemm", 512, "oom", NAN, -1));
  s.add("compute", recs);
  s.add("memory", {point("triad", 1024, "ok", 0.02, 3)});
  const std::string text = s.text("x.h5", "compute: 1 point oom", 2, 60, false);
  CHECK(text.rfind("FAILED: x.h5\n", 0) == 0);
  CHECK(has(text, "  - failed: compute: 1 point oom\n"));
  CHECK(has(text, "  - noisy: 5 point(s) vary by more than 5 % between iterations"));
  CHECK(has(text, "      compute gemm 104: CV 10 % of iteration_time_s\n"));  // the worst first
  CHECK(!has(text, "gemm 101:"));                                             // three named, ...
  CHECK(has(text, "      ... 2 more: compute 2\n"));  // ... the rest counted
  CHECK(has(text, "  - oom: 1 point(s) ran out of memory on some rank\n      compute gemm 512\n"));
  CHECK(has(text, "  - wrong data: 1 point(s)"));
  CHECK(has(text, "      memory triad 1024: 3 wrong_elements\n"));
  CHECK(has(text, "  report: rb-analysis report x.h5 --out x_report\n"));
  std::size_t start = 0;
  for (std::size_t nl = text.find('\n'); nl != std::string::npos;
       nl = text.find('\n', start = nl + 1))
    CHECK(nl - start <= 100);
}

TEST_CASE("summary: a report command too wide for one line continues on the next") {
  const std::string path = "results/small_20261127T235755Z.h5";  // the README job's file name
  const std::string text = rb::RunSummary().text(path, "", 0, 1, false);
  CHECK(has(text, "  report: rb-analysis report " + path +
                      " \\\n"
                      "            --out results/small_20261127T235755Z_report\n"));
  std::size_t start = 0;
  for (std::size_t nl = text.find('\n'); nl != std::string::npos;
       nl = text.find('\n', start = nl + 1))
    CHECK(nl - start <= 100);
}

TEST_CASE("summary: the report directory sits beside the file") {
  CHECK(rb::report_dir_for("results/small_20240101T000000Z.h5") ==
        "results/small_20240101T000000Z_report");
  CHECK(rb::report_dir_for("out") == "out_report");
  CHECK(rb::report_dir_for("a.b/out") == "a.b/out_report");
}
