#pragma once
// The parsed run configuration: the top-level sections as typed structs, and each
// sweep as (type, name, node) that the sweep registry turns into a typed sweep.
#include <memory>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/node.hpp"

namespace rb {

enum class Backend { Auto, Host, Cuda };
enum class BindingPolicy { None, Core, Numa, GpuNear };

const char* to_string(Backend b);
const char* to_string(BindingPolicy p);

struct RunSection {
  std::string name = "ringbench";
  std::string output_dir = "results";
  // Hang guard (app/watchdog.hpp): seconds the whole run / one point may take before every
  // rank stops with exit code 124; 0 = no limit (the keys are optional and must be > 0).
  double timeout_s = 0;
  double point_timeout_s = 0;
  // point_timeout_s: auto (the default) sets each sweep's point limit from its estimated time
  // (app/estimate.hpp, auto_point_timeout_s) so that a deadlock ends with a message; `off`
  // leaves points unbounded; a number is the limit for every point.
  bool point_timeout_auto = true;
  // The output file on a parallel file system (docs/multi-node.md): MPI-IO hints in file order
  // (striping_factor, striping_unit, cb_nodes, romio_cb_write, ...) and the alignment of every
  // HDF5 object of at least that many bytes (0: packed, HDF5's default).
  std::vector<std::pair<std::string, std::string>> mpiio_hints;
  std::uint64_t alignment_bytes = 0;
};

struct BindingSection {
  BindingPolicy policy = BindingPolicy::None;
};

struct KernelPolicyUse;  // config/policy_file.hpp

struct SweepSpec {
  std::string type;  // registry key, e.g. "ring_attention"
  std::string name;  // HDF5 group under /sweeps; defaults to type, unique per file
  cfg::Node node;    // the sweep's own map, validated by the sweep's parser
};

struct Config {
  std::string file;  // path as given on the command line
  std::string text;  // full text, stored verbatim in /run
  RunSection run;
  Backend backend = Backend::Auto;
  BindingSection binding;
  // `kernel_policy:` at the top level: the tuned policy `kernel: auto` follows in every sweep
  // without its own (null: the built-in rule).
  std::shared_ptr<KernelPolicyUse> kernel_policy;
  std::vector<SweepSpec> sweeps;
  // The whole document, kept so later checks of top-level keys (the backend against this
  // machine) point at their line without parsing the text again (a 16 MiB file costs seconds
  // and gigabytes per parse on every rank).
  cfg::Node root;
};

// Parses and validates the top-level schema. Sweep bodies are validated later by
// their parsers (they need the world size). Throws cfg::ConfigError.
Config parse_config_text(const std::string& text, const std::string& file);

// Longest run.name or sweep name: names become file and HDF5 group names.
inline constexpr std::size_t kMaxNameChars = 128;

// Largest config (and tuned policy) file read: the text is parsed on every rank.
inline constexpr std::uint64_t kMaxConfigBytes = 16u << 20;

// Reads a regular file of at most kMaxConfigBytes; a missing, unreadable, too large or
// non-regular file (directory, FIFO, device, socket) is a ConfigError with line 0.
std::string read_config_file(const std::string& path);

namespace cfg {
// The one YAML document of a file's text, with duplicate keys anywhere rejected (yaml-cpp would
// keep the first silently). Throws ConfigError with the position.
YAML::Node load_document(const std::string& text, const std::string& file);
}  // namespace cfg

}  // namespace rb
