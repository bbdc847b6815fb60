// The judging attributes of a metric (Meta::direction, judged, ranks, noise, inner_axis): their
// defaults and allowed words, the one place rb-analysis's reading of a column is decided.
#include <algorithm>
#include <initializer_list>
#include <string>

#include "metrics/h5.hpp"

namespace rb::h5 {
namespace {

bool one_of(const std::string& word, std::initializer_list<const char*> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return word == a; });
}

std::string direction_of_units(const std::string& units) {
  if (units == "B/s" || units == "TFLOP/s" || units == "Hz") return "higher";
  if (units == "s") return "lower";
  return "none";
}

}  // namespace

Meta resolved(const Meta& meta) {
  Meta m = meta;
  if (m.direction.empty()) m.direction = direction_of_units(m.units);
  if (m.judged.empty()) m.judged = "no";
  if (m.ranks.empty()) m.ranks = "limiting";
  if (m.noise.empty()) m.noise = "*";
  if (m.inner_axis.empty()) m.inner_axis = "none";
  return m;
}

std::string check_judging(const Meta& meta) {
  if (!one_of(meta.direction, {"", "higher", "lower", "none"}))
    return "direction '" + meta.direction + "' is not higher, lower or none";
  if (!one_of(meta.judged, {"", "no", "headline"}))
    return "judged '" + meta.judged + "' is not headline or no";
  if (!one_of(meta.ranks, {"", "limiting", "each"}))
    return "ranks '" + meta.ranks + "' is not limiting or each";
  if (!one_of(meta.noise,
              {"", "*", "ring", "compute", "memory", "host_transfer", "p2p_bandwidth", "latency"}))
    return "noise class '" + meta.noise + "' is not one rb-analysis knows (verdict.RUN_NOISE)";
  if (meta.judged == "headline" && resolved(meta).direction == "none")
    return "a headline metric needs a direction (higher or lower)";
  return "";
}

}  // namespace rb::h5
