// The top-level schema of a ringbench config file. Sweep bodies are left to the sweep
// parsers (they need the world size), but everything that is wrong regardless of the sweep
// (syntax, duplicate keys anywhere, unknown sections, sweep names) is rejected here, so
// --dry-run catches it before any rank touches a GPU.
#include "config/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <mpi.h>

#include "config/file_kind.hpp"
#include "config/policy_file.hpp"
#include "config/text_checks.hpp"
#include "config/yaml_guard.hpp"

namespace rb {

using cfg::ConfigError;
using cfg::Location;

namespace {

// One table per choice: the YAML spelling, the value, and (through choices_of) the list the
// config accepts, so the three cannot drift apart.
template <class E>
using Names = std::vector<std::pair<E, const char*>>;

const Names<Backend> kBackends = {
    {Backend::Auto, "auto"}, {Backend::Host, "host"}, {Backend::Cuda, "cuda"}};
const Names<BindingPolicy> kPolicies = {{BindingPolicy::None, "none"},
                                        {BindingPolicy::Core, "core"},
                                        {BindingPolicy::Numa, "numa"},
                                        {BindingPolicy::GpuNear, "gpu-near"}};

template <class E>
const char* name_of(const Names<E>& names, E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "?";
}

template <class E>
std::vector<std::string> choices_of(const Names<E>& names) {
  std::vector<std::string> out;
  for (const auto& entry : names) out.push_back(entry.second);
  return out;
}

// `name` was checked against choices_of(names) by get_choice.
template <class E>
E value_of(const Names<E>& names, const std::string& name) {
  for (const auto& [v, n] : names)
    if (name == n) return v;
  return names.front().first;
}

}  // namespace

const char* to_string(Backend b) {
  return name_of(kBackends, b);
}
const char* to_string(BindingPolicy p) {
  return name_of(kPolicies, p);
}

namespace {

Location location_of(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return Location{file, 0, 0};
  return Location{file, mark.line + 1, mark.column + 1};
}

std::string join_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// yaml-cpp keeps every entry of a repeated key and its lookups return the first, so a
// duplicate anywhere (also inside sweep bodies, which are parsed later) would silently drop
// a value the user wrote. Walk the whole document once.
void reject_duplicate_keys(const YAML::Node& node, const std::string& file,
                           const std::string& path) {
  if (node.IsMap()) {
    std::map<std::string, int> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsScalar()) {
        const std::string& k = it->first.Scalar();
        Location here = location_of(file, it->first.Mark());
        auto [pos, inserted] = seen.emplace(k, here.line);
        if (!inserted)
          throw ConfigError(here, join_path(path, k),
                            "duplicate key '" + k + "' in the same map, at lines " +
                                std::to_string(pos->second) + " and " + std::to_string(here.line) +
                                "; keep only one");
        reject_duplicate_keys(it->second, file, join_path(path, k));
      }
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      reject_duplicate_keys(node[i], file, path + "[" + std::to_string(i) + "]");
  }
}

// Names become HDF5 group and file names: keep them to a portable character set, and short
// enough that every file named after one (`<name>_<UTC time>.h5`, rb-analysis'
// `contention_<name>_monitor.png`) stays within a file name's 255 bytes with room to spare.
void check_name(const cfg::Node& owner, const std::string& key, const std::string& name) {
  if (name.empty())
    owner.fail(key, "expected a name of letters, digits, '_', '-' and '.', got an empty string");
  if (name.size() > kMaxNameChars)
    owner.fail(key, "expected a name of at most " + std::to_string(kMaxNameChars) +
                        " characters, got " + std::to_string(name.size()) + " ('" +
                        name.substr(0, 24) + "...')");
  for (std::size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.'))
      owner.fail(key, "expected a name of letters, digits, '_', '-' and '.', got '" + name +
                          "' (character '" + std::string(1, name[i]) + "' at position " +
                          std::to_string(i + 1) + " is not allowed)");
  }
  if (name == "." || name == "..")
    owner.fail(key, "expected a name of letters, digits, '_', '-' and '.', got '" + name +
                        "', which is a path component, not a name");
}

// The one YAML document of the file; syntax errors, an empty file and several documents are
// ConfigErrors with the position.
YAML::Node load_single_document(const std::string& text, const std::string& file) {
  cfg::check_config_bytes(text, file);    // what /run config_text could not keep verbatim
  cfg::check_yaml_expansion(text, file);  // before any tree exists: an alias bomb stops here
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(location_of(file, e.mark), "", "YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw ConfigError(location_of(file, e.mark), "", "cannot parse the YAML: " + e.msg);
  }
  if (documents.empty() ||
      (documents.size() == 1 && documents[0].IsNull() && documents[0].Mark().is_null()))
    throw ConfigError(Location{file, 0, 0}, "",
                      "the file is empty; expected a map with a 'sweeps' list");
  if (documents.size() > 1)
    throw ConfigError(location_of(file, documents[1].Mark()), "",
                      "expected one YAML document, got " + std::to_string(documents.size()) +
                          " (separated by '---'); put all sweeps in one 'sweeps' list");
  return documents[0];
}

// What a node that should be a map or list was instead, for messages.
std::string describe_shape(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  if (n.IsNull()) return "an empty value (null)";
  return "the scalar '" + n.Scalar() + "'";
}

// An optional limit in seconds: absent is 0 (no limit); present must be a number > 0.
double positive_seconds(const cfg::Node& run, const std::string& key) {
  if (!run.has(key)) return 0;
  const double value = run.get_double(key, 0);
  if (!(value > 0))
    run.child(key).fail("",
                        "expected a number of seconds > 0, got " + run.child(key).yaml().Scalar());
  return value;
}

// run.mpiio_hints: a map of hint name to a scalar value, passed to MPI-IO as text. Names are
// not checked against a list (each MPI library knows its own and ignores the rest), only for
// being names and values an MPI_Info accepts: MPI_Info_set refuses a longer one with an error
// that aborts every rank (MPI's handler) after the output file was claimed, leaving a file
// that is not HDF5 in the way of the next run.
std::vector<std::pair<std::string, std::string>> parse_mpiio_hints(const cfg::Node& run) {
  std::vector<std::pair<std::string, std::string>> hints;
  if (!run.has("mpiio_hints")) return hints;
  const cfg::Node map = run.child("mpiio_hints");
  if (!map.is_map())
    map.fail("", "expected a map of MPI-IO hint names to values (e.g. {striping_factor: 8}), got " +
                     describe_shape(map.yaml()));
  for (const std::string& key : map.keys()) {
    const cfg::Node value = map.child(key);
    if (!value.yaml().IsScalar() || value.yaml().Scalar().empty())
      value.fail("", "expected a value (a number or a word) for MPI-IO hint '" + key + "', got " +
                         describe_shape(value.yaml()));
    // MPI_Info_set takes fewer characters than MPI_MAX_INFO_KEY / _VAL (they count the NUL):
    // Open MPI 36 and 256, MPICH 255 and 1024.
    constexpr std::size_t kMaxHintName = MPI_MAX_INFO_KEY - 1, kMaxHintValue = MPI_MAX_INFO_VAL - 1;
    if (key.empty() || key.size() > kMaxHintName)
      map.fail(key, "MPI-IO hint names are 1 to " + std::to_string(kMaxHintName) +
                        " characters "
                        "(MPI_MAX_INFO_KEY of this MPI), got " +
                        std::to_string(key.size()));
    if (value.yaml().Scalar().size() > kMaxHintValue)
      value.fail("", "MPI-IO hint values are at most " + std::to_string(kMaxHintValue) +
                         " characters (MPI_MAX_INFO_VAL of this MPI), got " +
                         std::to_string(value.yaml().Scalar().size()));
    hints.emplace_back(key, value.yaml().Scalar());
  }
  return hints;
}

RunSection parse_run(const cfg::Node& run) {
  RunSection section;
  run.allow_only(
      {"name", "output_dir", "timeout_s", "point_timeout_s", "mpiio_hints", "alignment_bytes"});
  section.name = run.get_string("name", section.name);
  check_name(run, "name", section.name);
  section.output_dir = run.get_string("output_dir", section.output_dir);
  if (section.output_dir.empty())
    run.fail("output_dir", "expected a directory path, got an empty string");
  section.timeout_s = positive_seconds(run, "timeout_s");
  const std::string point =
      run.has("point_timeout_s") ? run.child("point_timeout_s").yaml().Scalar() : "auto";
  section.point_timeout_auto = point == "auto";
  if (point != "auto" && point != "off") {
    if (run.child("point_timeout_s").yaml().IsScalar() && !point.empty() &&
        std::isalpha(static_cast<unsigned char>(point[0])))
      run.child("point_timeout_s")
          .fail("", "expected a number of seconds > 0, auto or off, got " + point);
    section.point_timeout_s = positive_seconds(run, "point_timeout_s");
  }
  section.mpiio_hints = parse_mpiio_hints(run);
  section.alignment_bytes = run.get_bytes("alignment_bytes", 0);
  return section;
}

// One entry of the `sweeps` list; `names` holds the sweeps before it (name -> index, line),
// so a repeated name is reported with both places.
SweepSpec parse_sweep_entry(const cfg::Node& sweep, std::size_t index,
                            std::map<std::string, std::pair<std::size_t, int>>& names) {
  if (!sweep.is_map())
    sweep.fail("", "expected a map with a 'type' key, got " + describe_shape(sweep.yaml()));
  SweepSpec spec;
  // Which types exist is the sweep registry's business; here only the shape is checked.
  spec.type = sweep.require_string("type");
  if (spec.type.empty()) sweep.fail("type", "expected a sweep type, got an empty string");
  const bool named = sweep.has("name");
  spec.name = sweep.get_string("name", spec.type);
  if (named) check_name(sweep, "name", spec.name);
  spec.node = sweep;

  const Location here = named ? sweep.child("name").location() : sweep.location();
  auto [previous, inserted] = names.emplace(spec.name, std::make_pair(index, here.line));
  if (!inserted) {
    const auto where = [](std::size_t i, int line) {
      return "sweeps[" + std::to_string(i) + "] (line " + std::to_string(line) + ")";
    };
    sweep.fail(named ? "name" : "",
               "duplicate sweep name '" + spec.name + "': used by " +
                   where(previous->second.first, previous->second.second) + " and " +
                   where(index, here.line) +
                   "; names must be unique (a sweep without 'name' is named after its type), "
                   "so give one of them a distinct 'name'");
  }
  return spec;
}

std::vector<SweepSpec> parse_sweep_list(const cfg::Node& root) {
  if (!root.has("sweeps"))
    root.fail("", "missing required key 'sweeps' (a list of sweeps, each a map with a 'type')");
  cfg::Node sweeps = root.child("sweeps");
  if (!sweeps.is_sequence() || sweeps.size() == 0) {
    const std::string got = sweeps.is_sequence() ? "an empty list"
                            : sweeps.is_map()    ? "a map (start each sweep with '- ')"
                                                 : describe_shape(sweeps.yaml());
    sweeps.fail("", "expected a non-empty list of sweeps, each a map with a 'type', got " + got);
  }
  std::map<std::string, std::pair<std::size_t, int>> names;
  std::vector<SweepSpec> out;
  for (std::size_t i = 0; i < sweeps.size(); ++i)
    out.push_back(parse_sweep_entry(sweeps.element(i), i, names));
  return out;
}

}  // namespace

YAML::Node cfg::load_document(const std::string& text, const std::string& file) {
  YAML::Node yaml = load_single_document(text, file);
  reject_duplicate_keys(yaml, file, "");
  return yaml;
}

Config parse_config_text(const std::string& text, const std::string& file) {
  Config config;
  config.file = file;
  config.text = text;
  const YAML::Node yaml = load_single_document(text, file);
  cfg::Node root(yaml, file, "");
  if (!yaml.IsMap())
    root.fail("",
              "expected a map with a 'sweeps' list at the top level, got " + describe_shape(yaml));
  reject_duplicate_keys(yaml, file, "");
  root.allow_only({"run", "backend", "binding", "kernel_policy", "sweeps"});
  if (root.has("run")) config.run = parse_run(root.child("run"));
  config.backend = value_of(kBackends, root.get_choice("backend", "auto", choices_of(kBackends)));
  if (root.has("binding")) {
    cfg::Node binding = root.child("binding");
    binding.allow_only({"policy"});
    config.binding.policy =
        value_of(kPolicies, binding.get_choice("policy", "none", choices_of(kPolicies)));
  }
  if (root.has("kernel_policy")) config.kernel_policy = parse_kernel_policy(root, "kernel_policy");
  config.sweeps = parse_sweep_list(root);
  config.root = root;
  return config;
}

// Only a regular file of at most kMaxConfigBytes is read: a FIFO would block the reading rank
// forever and a device (/dev/zero) would never end. O_NONBLOCK keeps open() itself from
// blocking when a FIFO replaced the file after the stat; fstat on the open file decides.
std::string read_config_file(const std::string& path) {
  auto fail = [&](const std::string& why) {
    throw ConfigError(Location{path, 0, 0}, "", "cannot read the file: " + why);
  };
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) fail(std::strerror(errno));
  auto check = [&](const struct stat& st) {
    if (!S_ISREG(st.st_mode))
      fail(std::string("it is ") + cfg::file_kind(st.st_mode) + ", not a YAML file");
    if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigBytes)
      fail("it is " + std::to_string(st.st_size) + " bytes; a config may have at most " +
           std::to_string(kMaxConfigBytes) + " bytes (16 MiB)");
  };
  check(info);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(std::strerror(errno));
  std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* f) {
    ::close(*f);
    delete f;
  });
  if (::fstat(fd, &info) != 0) fail(std::strerror(errno));
  check(info);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxConfigBytes)
      fail("it grew past " + std::to_string(kMaxConfigBytes) + " bytes while being read");
  }
  return text;
}

}  // namespace rb
