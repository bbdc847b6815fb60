#include "app/json_report.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <fmt/format.h>

#include "app/file_write.hpp"

namespace rb {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20)
      out += fmt::format("\\u{:04x}", c);
    else
      out += ch;
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);  // shortest text that reads back as the same double
}

std::string json_object(const std::vector<std::pair<std::string, std::string>>& strings) {
  std::string out = "{";
  for (const auto& [k, v] : strings)
    out += (out.size() > 1 ? ", " : "") + json_string(k) + ": " + json_string(v);
  return out + "}";
}

namespace {

std::string value_of(const h5::PointRecord::Field& f) {
  return f.is_text ? json_string(f.text) : json_number(f.number);
}

// {"sweep": .., "type": .., "point": i, "keys": {..}, "metrics": {name: {value, units, ...}}}
std::string record_text(const std::string& sweep, const std::string& type, std::size_t index,
                        const h5::PointRecord& r) {
  std::string keys, metrics;
  for (const auto& k : r.keys)
    keys += (keys.empty() ? "" : ", ") + json_string(k.name) + ": " + value_of(k);
  for (const auto& m : r.metrics) {
    // A metric shown with two statistics (e.g. min and max over ranks) is keyed by both.
    const std::string name =
        m.name + (m.how.inner == h5::OverInner::None ? "" : "." + h5::to_string(m.how.inner)) +
        "." + h5::to_string(m.how.ranks);
    metrics += fmt::format(
        "{}{}: {{\"value\": {}, \"units\": {}, \"dataset\": {}, \"over_inner\": {}, "
        "\"over_ranks\": {}, \"statistic\": {}}}",
        metrics.empty() ? "" : ", ", json_string(name), value_of(m), json_string(m.units),
        json_string(m.name), json_string(h5::to_string(m.how.inner)),
        json_string(h5::to_string(m.how.ranks)), json_string(m.statistic));
  }
  return fmt::format(
      "{{\"sweep\": {}, \"type\": {}, \"point\": {}, \"keys\": {{{}}}, \"metrics\": {{{}}}}}",
      json_string(sweep), json_string(type), index, keys, metrics);
}

}  // namespace

JsonReport::JsonReport(std::string path, std::vector<std::pair<std::string, std::string>> header,
                       bool replace_link)
    : path_(std::move(path)), header_(std::move(header)), replace_link_(replace_link) {}

void JsonReport::add_sweep(const std::string& name, const std::string& type,
                           std::vector<h5::PointRecord> records) {
  sweeps_.push_back({name, type, "running", "", 0, std::move(records)});
}

void JsonReport::sweep_done(const std::string& status, const std::string& failure, double seconds) {
  if (sweeps_.empty()) return;
  sweeps_.back().status = status;
  sweeps_.back().failure = failure;
  sweeps_.back().seconds = seconds;
}

void JsonReport::write(const std::string& run_status, const std::string& failure) const {
  if (to_stdout() && (run_status == "running" || written_to_stdout_)) return;
  std::string text = "{\n";
  for (const auto& [k, v] : header_) text += "  " + json_string(k) + ": " + v + ",\n";
  text += "  \"status\": " + json_string(run_status) + ",\n  \"failure\": " + json_string(failure) +
          ",\n  \"sweeps\": [";
  std::string records;
  for (std::size_t s = 0; s < sweeps_.size(); ++s) {
    const Sweep& sw = sweeps_[s];
    text += fmt::format(
        "{}\n    {{\"name\": {}, \"type\": {}, \"status\": {}, \"failure\": {}, "
        "\"wall_time_s\": {}, \"points\": {}}}",
        s ? "," : "", json_string(sw.name), json_string(sw.type), json_string(sw.status),
        json_string(sw.failure), json_number(sw.seconds), sw.records.size());
    for (std::size_t i = 0; i < sw.records.size(); ++i)
      records += (records.empty() ? "\n    " : ",\n    ") +
                 record_text(sw.name, sw.type, i, sw.records[i]);
  }
  text += "\n  ],\n  \"records\": [" + records + "\n  ]\n}\n";
  if (to_stdout()) {
    written_to_stdout_ = true;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  write_file_replacing(path_, text, replace_link_, "--json file");
}

void write_json(const JsonReport& json, const std::string& status, const std::string& failure) {
  try {
    json.write(status, failure);
  } catch (const std::exception& e) {
    if (json.first_failure())
      fmt::print(stderr,
                 "ringbench: warning: {}; it is tried again after each sweep and at the end, "
                 "without another warning\n",
                 e.what());
  }
}

}  // namespace rb
