#include "config/policy_file.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "config/sha256.hpp"

namespace rb {
namespace {

constexpr const char* kKind = "ringbench-kernel-policy";
// Version 2 added `grid:` (the tuning sweep's batch and heads), without which the kernel
// shapes a range measured are unknown.
constexpr std::int64_t kVersion = 2;

// A scalar that may be null (the tuner writes null for what the run did not record).
std::string text_or_empty(const cfg::Node& n, const std::string& key) {
  if (!n.has(key) || n.child(key).yaml().IsNull()) return "";
  return n.get_string(key, "");
}

}  // namespace

PolicyMachine parse_policy_machine(const cfg::Node& root) {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> keys = {
      required(choice("device", "", {"host", "cuda"}, "the path the timings ran on")),
      text("gpu", "", "the GPU model"),
      text("gpu_arch", "", "its compute capability").computed("known_gpu_arch(gpu)"),
      text("cuda_driver", "", "CUDA driver version"),
      text("cuda_runtime", "", "CUDA runtime version"),
      text("cudnn", "", "cuDNN version"),
      text("ringbench_version", "", "the ringbench that measured"),
      text("commit", "", "its commit")};
  if (!root.has("machine"))
    root.fail("machine", "required: where the policy was tuned (device, gpu, cudnn, ...)");
  const cfg::Node m = root.child("machine");
  m.require_map();
  cfg::check_keys(m, keys);
  PolicyMachine out;
  if (!m.has("device")) m.fail("device", "required: host or cuda");
  out.device = m.get_choice("device", "", {"host", "cuda"});
  out.gpu = text_or_empty(m, "gpu");
  out.cuda_driver = text_or_empty(m, "cuda_driver");
  out.cuda_runtime = text_or_empty(m, "cuda_runtime");
  out.cudnn = text_or_empty(m, "cudnn");
  out.ringbench_version = text_or_empty(m, "ringbench_version");
  out.commit = text_or_empty(m, "commit");
  out.gpu_arch = text_or_empty(m, "gpu_arch");
  if (out.gpu_arch.empty()) out.gpu_arch = known_gpu_arch(out.gpu);
  return out;
}

std::vector<cfg::KeySpec> policy_file_keys(std::vector<cfg::KeySpec> own) {
  using namespace cfg::key;
  std::vector<cfg::KeySpec> keys = {
      required(integer("version", "", INT64_MIN, INT64_MAX, "the file format's version")),
      required(text("kind", "", "what the file is")),
      required(other("machine", "map", "", "", "where the timings were taken")),
      other("source", "string", "none", "", "the sweep file the tuner read"),
      other("sweep", "string", "none", "", "the sweep in it"),
      other("date", "string", "none", "", "when the tuner ran"),
      other("margin", "number", "none", "", "the tuner's margin"),
      other("hysteresis", "number", "none", "", "the tuner's hysteresis")};
  keys.insert(keys.end(), own.begin(), own.end());
  keys.push_back(required(other("rules", "list", "", "", "one rule per shape")));
  return keys;
}

std::vector<cfg::KeySpec> policy_rule_keys(std::vector<cfg::KeySpec> own, std::string ranges) {
  using namespace cfg::key;
  std::vector<cfg::KeySpec> keys = {
      required(dtype("dtype", "", {"fp32", "fp16", "bf16"}, "storage dtype of the blocks")),
      required(integer("head_dim", "", 1, 1024, "head dimension"))};
  keys.insert(keys.end(), own.begin(), own.end());
  keys.push_back(required(other("ranges", "list", "", "", std::move(ranges))));
  return keys;
}

std::vector<cfg::KeySpec> policy_range_keys(const std::string& unit, const std::string& choice,
                                            std::vector<cfg::KeySpec> own) {
  using namespace cfg::key;
  std::vector<cfg::KeySpec> keys = {
      required(integer(unit + "_min", "", 1, INT64_MAX, "the range's first " + unit)),
      required(integer(unit + "_max", "", INT64_MIN, INT64_MAX, "its last (>= the first)")),
      required(other(choice, choice + " or null", "", "", "the " + choice + " tuned fastest"))};
  keys.insert(keys.end(), own.begin(), own.end());
  keys.push_back(other("default_" + choice, choice, "none", "", "what the built-in rule runs"));
  keys.push_back(other("speedup", "number", "none", "", "the measured gain"));
  return keys;
}

void check_policy_format(const cfg::Node& root, const PolicyFormat& format) {
  const std::string version = std::to_string(format.version);
  if (!root.has("version"))
    root.fail("version",
              "required: the " + std::string(format.what) + " format version (" + version + ")");
  const std::int64_t found = root.require_int("version");
  if (found != format.version)
    root.fail("version", "this ringbench reads " + std::string(format.what) + " version " +
                             version + ", the file is version " + std::to_string(found));
  if (root.get_string("kind", "") != format.kind)
    root.fail("kind", "expected '" + std::string(format.kind) +
                          "' (a file written by `rb-analysis " + format.tool + "`)");
}

namespace {

std::vector<std::string> path_names(attn::Device device) {
  std::vector<std::string> names;
  for (const attn::KernelPath& k : attn::kernel_paths())
    if (k.device == device) names.push_back(k.name);
  return names;
}

const attn::KernelPath& known_path(const cfg::Node& n, const std::string& key,
                                   attn::Device device) {
  const std::string name = n.get_string(key, "");
  if (const attn::KernelPath* row = attn::find_kernel_path(name, device)) return *row;
  const auto names = path_names(device);
  const std::string list = cfg::join(names, ", ");
  const std::string hint = cfg::did_you_mean(name, names);
  n.fail(key, "unknown kernel path '" + name + "' for device " + attn::to_string(device) + " (" +
                  list + ")" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
}

// A rule's shape and its ranges; the shape's keys are what the lookup matches a block by.
const std::vector<cfg::KeySpec>& rule_keys() {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> keys = policy_rule_keys(
      {required(flag("causal", "", "causal masking")),
       integer("segment", "0", 0, INT64_MAX, "LongNet segment (0: exact attention)"),
       integer("rate", "0", 0, INT64_MAX, "LongNet dilation rate (0: exact attention)")},
      "block-rows ranges and their paths");
  return keys;
}

const std::vector<cfg::KeySpec>& range_keys() {
  static const std::vector<cfg::KeySpec> keys = policy_range_keys("block_rows", "path", {});
  return keys;
}

attn::PolicyShape parse_shape(const cfg::KeyReader& r) {
  for (const char* key : {"dtype", "head_dim", "causal"})
    if (!r.has(key))
      r.node().fail(key, "required in every rule (dtype, head_dim, causal, segment, rate)");
  attn::PolicyShape s;
  const std::string dtype = r.dtype("dtype");
  for (const auto& d : attn::kDTypeNames)
    if (dtype == d.name) s.dtype = d.dtype;
  s.head_dim = static_cast<int>(r.integer("head_dim", 0));
  s.causal = r.flag("causal");
  s.segment = r.integer("segment");
  s.rate = r.integer("rate");
  const bool exact = s.segment == 0 && s.rate == 0;
  if (!exact && (s.segment < 1 || s.rate < 1 || s.segment % s.rate != 0))
    r.node().fail("rate", "segment " + std::to_string(s.segment) + ", rate " +
                              std::to_string(s.rate) +
                              ": expected 0, 0 (exact attention) or rate >= 1 dividing segment");
  return s;
}

attn::PolicyRange parse_range(const cfg::Node& e, const attn::PolicyShape& shape,
                              attn::Device device, std::int64_t previous_max) {
  e.require_map();
  cfg::check_keys(e, range_keys());
  if (e.has("default_path") && !e.child("default_path").yaml().IsNull())
    known_path(e, "default_path", device);
  attn::PolicyRange range;
  range.rows_min = e.require_int("block_rows_min", 1);
  range.rows_max = e.require_int("block_rows_max", range.rows_min);
  if (range.rows_min <= previous_max)
    e.fail("block_rows_min",
           "ranges must ascend without overlap: " + std::to_string(range.rows_min) +
               " <= the previous range's end " + std::to_string(previous_max));
  if (!e.has("path"))
    e.fail("path", "required: a kernel path, or null where no path passed parity");
  if (e.child("path").yaml().IsNull()) return range;
  range.row = &known_path(e, "path", device);
  if (!range.row->supports.takes(shape.dtype, shape.head_dim, shape.causal, shape.segment > 0))
    e.fail("path", "kernel path '" + std::string(range.row->name) +
                       "' cannot run this rule's blocks (dtype, head_dim, causal or dilation)");
  return range;
}

attn::PolicyRule parse_rule(const cfg::Node& r, attn::Device device) {
  r.require_map();
  attn::PolicyRule rule;
  rule.shape = parse_shape(cfg::KeyReader(r, rule_keys()));
  if (!r.has("ranges")) r.fail("ranges", "required: a list of block-rows ranges and their paths");
  const cfg::Node ranges = r.child("ranges");
  if (!ranges.is_sequence() || ranges.size() == 0)
    ranges.fail("", "expected a non-empty list of {block_rows_min, block_rows_max, path}");
  std::int64_t previous_max = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    rule.ranges.push_back(parse_range(ranges.element(i), rule.shape, device, previous_max));
    previous_max = rule.ranges.back().rows_max;
  }
  return rule;
}

void parse_grid(const cfg::Node& root, attn::KernelPolicy& policy) {
  if (!root.has("grid"))
    root.fail("grid", "required: the tuning sweep's {batch, num_heads} (what its blocks computed)");
  const cfg::Node g = root.child("grid");
  g.require_map();
  g.allow_only({"batch", "num_heads"});
  policy.grid_batch = static_cast<int>(g.require_int("batch", 1, 1 << 20));
  policy.grid_heads = static_cast<int>(g.require_int("num_heads", 1, 1 << 16));
}

void parse_rules(const cfg::Node& root, attn::KernelPolicy& policy) {
  if (!root.has("rules")) root.fail("rules", "required: the tuned rules (a list, one per shape)");
  const cfg::Node rules = root.child("rules");
  if (!rules.is_sequence()) rules.fail("", "expected a list of rules, one per shape");
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const cfg::Node r = rules.element(i);
    attn::PolicyRule rule = parse_rule(r, policy.device);
    for (std::size_t j = 0; j < policy.rules.size(); ++j)
      if (policy.rules[j].shape == rule.shape)
        r.fail("", "a second rule for the shape of rules[" + std::to_string(j) +
                       "]; keep one rule per (dtype, head_dim, causal, segment, rate)");
    policy.rules.push_back(std::move(rule));
  }
}

// `kernel_policy:` may name any readable file (/etc/shadow): until the file shows it is a policy
// (a YAML map with a `kind` key), no message may quote its content (an unknown key, a duplicate
// key or a YAML error would echo a line of it). Parses the text, or refuses it without content.
constexpr const char* kNotAPolicy =
    "not a tuned kernel policy: expected a YAML map with 'kind: ringbench-kernel-policy', version, "
    "machine and rules, as `rb-analysis tune` writes (the file's content is not shown)";

cfg::Node policy_root(const std::string& text, const std::string& file) {
  const auto refuse = [&] { throw cfg::ConfigError(cfg::Location{file, 0, 0}, "", kNotAPolicy); };
  YAML::Node yaml;
  try {
    yaml = cfg::load_document(text, file);
  } catch (const cfg::ConfigError&) {
    if (text.find(kKind) == std::string::npos) refuse();  // a policy's own YAML error is shown
    throw;
  }
  const YAML::Node& map = yaml;  // const: a lookup inserts nothing
  if (!map.IsMap() || !map["kind"]) refuse();
  return cfg::Node(yaml, file, "");
}

}  // namespace

std::string resolve_policy_path(const cfg::Node& owner, const std::string& key, std::string file) {
  if (file.empty())
    owner.fail(key, "expected the path of a tuned policy file, got an empty string");
  if (file[0] == '/') return file;
  const std::string& config = owner.file();
  const auto slash = config.rfind('/');
  return (slash == std::string::npos ? "" : config.substr(0, slash + 1)) + file;
}

std::shared_ptr<KernelPolicyUse> parse_kernel_policy_text(const std::string& text,
                                                          const std::string& file) {
  static const std::vector<cfg::KeySpec> keys = policy_file_keys({cfg::key::required(
      cfg::key::other("grid", "map", "", "", "the tuning sweep's {batch, num_heads}"))});
  const cfg::Node root = policy_root(text, file);
  cfg::check_keys(root, keys);
  if (root.has("version") && root.require_int("version") == 1)
    root.fail("version",
              "a version 1 policy does not say the batch and heads it was tuned at, "
              "which auto needs to match blocks by kernel shape; run `rb-analysis tune` "
              "on its sweep file (`source:`) again to write version 2");
  check_policy_format(root, {"policy", kVersion, kKind, "tune"});
  auto use = std::make_shared<KernelPolicyUse>();
  use->file = file;
  use->machine = parse_policy_machine(root);
  auto policy = std::make_shared<attn::KernelPolicy>();
  policy->device = use->machine.device == "cuda" ? attn::Device::Cuda : attn::Device::Host;
  policy->file = file;
  policy->sha256 = sha256_hex(text);
  parse_grid(root, *policy);
  parse_rules(root, *policy);
  use->policy = policy;
  use->source = {policy, file + " (sha256 " + policy->sha256 + ")"};
  return use;
}

PolicyKey read_policy_key(const cfg::Node& owner, const std::string& key, const std::string& what) {
  const cfg::Node v = owner.child(key);
  PolicyKey k;
  if (v.is_map()) {
    v.allow_only({"file", "strict"});
    k.file = v.require_string("file");
    k.strict = v.get_bool("strict", false);
  } else {
    k.file = owner.require_string(key);
  }
  k.file = resolve_policy_path(owner, key, k.file);
  try {
    k.text = read_config_file(k.file);
  } catch (const cfg::ConfigError& e) {
    owner.fail(key, "cannot read the " + what + " file '" + k.file + "': " + e.message());
  }
  k.key = owner.path().empty() ? key : owner.path() + "." + key;
  k.where = v.location();
  return k;
}

std::shared_ptr<KernelPolicyUse> parse_kernel_policy(const cfg::Node& owner,
                                                     const std::string& key) {
  const PolicyKey k = read_policy_key(owner, key, "tuned policy");
  std::shared_ptr<KernelPolicyUse> use;
  try {
    use = parse_kernel_policy_text(k.text, k.file);
  } catch (const cfg::ConfigError& e) {
    // A file that is no policy at all: said at the key that named it.
    if (e.message() != kNotAPolicy) throw;
    owner.fail(key, "'" + k.file + "' is " + e.message());
  }
  use->key = k.key;
  use->where = k.where;
  use->strict = k.strict;
  return use;
}

std::string known_gpu_arch(const std::string& gpu) {
  // Longest names first: "GH200" before "H200".
  static const std::pair<const char*, const char*> kModels[] = {
      {"GH200", "9.0"}, {"H100", "9.0"},  {"H200", "9.0"},  {"H800", "9.0"},  {"H20", "9.0"},
      {"A100", "8.0"},  {"A800", "8.0"},  {"A30", "8.0"},   {"L40S", "8.9"},  {"L40", "8.9"},
      {"L4", "8.9"},    {"B200", "10.0"}, {"B100", "10.0"}, {"GB200", "10.0"}};
  for (const auto& [name, arch] : kModels)
    if (gpu.find(name) != std::string::npos) return arch;
  return "";
}

std::string ported_from(const PolicyMachine& m, const ThisMachine& here) {
  const bool same_arch = !m.gpu_arch.empty() && m.gpu_arch == here.gpu_arch;
  return here.device == "cuda" && m.device == "cuda" && m.gpu != here.gpu && same_arch ? m.gpu : "";
}

std::string ported_from(const KernelPolicyUse& use, const ThisMachine& here) {
  return ported_from(use.machine, here);
}

std::string machine_applicability(const PolicyMachine& m, const ThisMachine& here) {
  if (m.device != here.device)
    return "it was tuned on the " + m.device + " path and this run is on the " + here.device +
           " path";
  if (here.device == "cuda" && m.gpu != here.gpu &&
      (m.gpu_arch.empty() || m.gpu_arch != here.gpu_arch))
    return "it was tuned on GPU '" + m.gpu + "' (sm " +
           (m.gpu_arch.empty() ? "unknown" : m.gpu_arch) + ") and this rank has '" + here.gpu +
           "' (sm " + (here.gpu_arch.empty() ? "unknown" : here.gpu_arch) +
           "), another architecture";
  if (here.device == "cuda" && m.cudnn != here.cudnn)
    return "it was tuned with cuDNN " + (m.cudnn.empty() ? "(none)" : m.cudnn) +
           " and this run has " + (here.cudnn.empty() ? "(none)" : here.cudnn);
  return "";
}

std::string applicability(const KernelPolicyUse& use, const ThisMachine& here) {
  const std::string why = machine_applicability(use.machine, here);
  if (!why.empty()) return why;
  for (const attn::PolicyRule& rule : use.policy->rules)
    for (const attn::PolicyRange& r : rule.ranges)
      if (r.row != nullptr && !r.row->built)
        return "it names kernel path '" + std::string(r.row->name) + "', which this build lacks (" +
               r.row->missing + ")";
  return "";
}

}  // namespace rb
