#include "app/run_summary.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "app/progress.hpp"

namespace rb {
namespace {

constexpr std::size_t kExamples = 3;  // points named per category; the rest are counted
constexpr std::size_t kLabelChars = 64;

// The point as a person reads it: its plan line where the sweep keeps one, else its keys'
// values ("gemm kokkos float32 256").
std::string point_label(const h5::PointRecord& r) {
  std::string s = r.text("label");
  if (s.empty())
    for (const auto& k : r.keys) {
      const std::string v = k.is_text ? k.text : h5::fixed(k.number, 0);
      if (!v.empty() && v != "-") s += (s.empty() ? "" : " ") + v;
    }
  if (s.size() > kLabelChars) s = s.substr(0, kLabelChars - 3) + "...";
  return s;
}

bool counts_wrong_data(const std::string& metric) {
  return metric.rfind("wrong", 0) == 0 || metric.rfind("corrupt", 0) == 0;
}

}  // namespace

std::string report_dir_for(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.rfind('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  return (has_ext ? path.substr(0, dot) : path) + "_report";
}

void RunSummary::add(const std::string& sweep, const std::vector<h5::PointRecord>& records) {
  points_ += records.size();
  for (const auto& r : records) {
    const std::string where = point_label(r);
    const std::string status = r.text("status");
    if (!status.empty() && status != "ok") findings_.push_back({status, sweep, where, "", 1});
    for (const auto& m : r.metrics) {
      if (m.is_text || std::isnan(m.number)) continue;
      if (m.how.inner == h5::OverInner::Cv && m.number > kNoisyCv)
        findings_.push_back({"noisy", sweep, where,
                             fmt::format("CV {:.0f} % of {}", 100 * m.number, m.name), m.number});
      else if (m.how.inner != h5::OverInner::Cv && counts_wrong_data(m.name) && m.number > 0)
        findings_.push_back({"wrong data", sweep, where,
                             fmt::format("{} {}", h5::fixed(m.number, 0), m.name), m.number});
    }
  }
}

namespace {

std::string category_heading(const std::string& category, std::size_t n) {
  if (category == "noisy")
    return fmt::format(
        "noisy: {} point(s) vary by more than {:.0f} % between iterations (CV, "
        "slowest rank): untrustworthy",
        n, 100 * kNoisyCv);
  if (category == "wrong data")
    return fmt::format("wrong data: {} point(s) whose results failed the data check", n);
  if (category == "oom") return fmt::format("oom: {} point(s) ran out of memory on some rank", n);
  return fmt::format("{}: {} point(s)", category, n);
}

// "... 12 more: ring_causal 4, compute 3": the points not named, counted per sweep in run order.
template <class Findings>
std::string more_line(const Findings& list, std::size_t shown, std::size_t width) {
  std::vector<std::pair<std::string, std::size_t>> per_sweep;
  for (std::size_t i = shown; i < list.size(); ++i) {
    auto it = std::find_if(per_sweep.begin(), per_sweep.end(),
                           [&](const auto& p) { return p.first == list[i].sweep; });
    if (it == per_sweep.end())
      per_sweep.emplace_back(list[i].sweep, 1);
    else
      ++it->second;
  }
  std::string text = fmt::format("... {} more:", list.size() - shown);
  for (std::size_t i = 0; i < per_sweep.size(); ++i)
    text += fmt::format("{} {} {}", i ? "," : "", per_sweep[i].first, per_sweep[i].second);
  return h5::wrapped(text, width, "      ", "        ");
}

}  // namespace

std::string RunSummary::text(const std::string& path, const std::string& failures,
                             std::size_t sweeps, double seconds, bool quiet,
                             const std::string& status) const {
  const bool interrupted = status == "interrupted";
  std::string out = fmt::format(
      "{}: {}\n", interrupted ? "INTERRUPTED" : (failures.empty() ? "complete" : "FAILED"), path);
  if (quiet) return out;
  const std::size_t width = h5::kTerminalWidth;
  // Categories in the order they were first met, each with its worst points first.
  std::vector<std::string> order;
  std::map<std::string, std::vector<Finding>> by;
  for (const Finding& f : findings_) {
    if (!by.count(f.category)) order.push_back(f.category);
    by[f.category].push_back(f);
  }
  const bool nothing = failures.empty() && order.empty();
  out += fmt::format(
      "  {} sweep(s), {} point(s) in {}; {}\n", sweeps, points_, duration_text(seconds),
      nothing ? "nothing stood out (every point ok, no noisy iterations)" : "what stood out:");
  if (!failures.empty())
    out += h5::wrapped((interrupted ? "interrupted: " : "failed: ") + failures, width, "  - ",
                       "      ");
  for (const std::string& c : order) {
    auto& list = by[c];
    std::stable_sort(list.begin(), list.end(),
                     [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
    out += h5::wrapped(category_heading(c, list.size()), width, "  - ", "    ");
    for (std::size_t i = 0; i < std::min(list.size(), kExamples); ++i) {
      const Finding& f = list[i];
      out += h5::wrapped(f.sweep + " " + f.point + (f.detail.empty() ? "" : ": " + f.detail), width,
                         "      ", "        ");
    }
    if (list.size() > kExamples) out += more_line(list, kExamples, width);
  }
  // A command to copy whole: one line, or where that is too wide two joined by a backslash
  // (a shell reads them as one); only a path longer than a line makes a longer one.
  const std::string command = "rb-analysis report " + path;
  const std::string out_dir = "--out " + report_dir_for(path);
  const std::string one_line = "  report: " + command + " " + out_dir;
  out += one_line.size() <= width ? one_line + "\n"
                                  : "  report: " + command + " \\\n            " + out_dir + "\n";
  return out;
}

}  // namespace rb
