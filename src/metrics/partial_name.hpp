#pragma once
// The temporary name a --force run writes its new file under, beside the output it replaces
// (renamed over it when the run closes it whole): ".NAME.rbPID.partial" for output DIR/NAME. The
// output's name is in it so that a later run holding that output's lock knows which leftovers of
// killed runs are its own to remove (OutputLock), and no other output's.
#include <string>

namespace rb::h5 {

// What every partial name of `output_name` (the output's file name, no directory) starts with.
inline std::string partial_prefix(const std::string& output_name) {
  return "." + output_name + ".rb";
}

inline std::string partial_name(const std::string& output_name, long pid) {
  return partial_prefix(output_name) + std::to_string(pid) + ".partial";
}

}  // namespace rb::h5
