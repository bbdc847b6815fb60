#include "sweeps/cp_policy.hpp"

#include <cmath>
#include <limits>
#include <utility>

#include "config/config.hpp"
#include "config/sha256.hpp"
#include "ring/cp_attention.hpp"
#include "ring/problem.hpp"

namespace rb {
namespace {

constexpr const char* kKind = "ringbench-cp-policy";
constexpr std::int64_t kVersion = 1;

// A rule: the shape a scheme is chosen for (every key of it required), and its ranges.
const std::vector<cfg::KeySpec>& rule_keys() {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> keys = policy_rule_keys(
      {required(integer("num_heads", "", 1, 1 << 16, "query heads")),
       required(integer("num_kv_heads", "", 1, 1 << 16, "K/V heads (<= num_heads)")),
       required(flag("causal", "", "causal masking")),
       required(choice("layout", "", ring::layout_names(), "the ring's sharding")),
       required(text("dilation", "", "none, or SEGMENT/RATE of each LongNet branch")),
       required(integer("ring_size", "", 1, 1 << 20, "ranks of the context-parallel group")),
       required(choice("span", "", {"node", "nodes"}, "the group inside one node, or across"))},
      "tokens-per-rank ranges and their schemes");
  return keys;
}

const std::vector<cfg::KeySpec>& range_keys() {
  static const std::vector<cfg::KeySpec> keys = policy_range_keys(
      "tokens", "scheme",
      {cfg::key::other("ulysses_degree", "integer", "by scheme", "", "hybrid's Ulysses subgroup")});
  return keys;
}

CpShape parse_shape(const cfg::KeyReader& rr) {
  const cfg::Node& r = rr.node();
  std::vector<std::string> shape;
  for (const cfg::KeySpec& k : rule_keys())
    if (k.name != "ranges") shape.push_back(k.name);
  for (const std::string& key : shape)
    if (!r.has(key)) r.fail(key, "required in every rule (" + cfg::join(shape, ", ") + ")");
  CpShape s;
  s.dtype = rr.dtype("dtype");
  s.head_dim = static_cast<int>(rr.integer("head_dim", 0));
  s.num_heads = static_cast<int>(rr.integer("num_heads", 0));
  s.num_kv_heads = static_cast<int>(r.require_int("num_kv_heads", 1, s.num_heads));
  s.causal = rr.flag("causal");
  s.layout = rr.choice("layout");
  s.dilation = rr.text("dilation");
  s.ring_size = static_cast<int>(rr.integer("ring_size", 0));
  s.span = rr.choice("span");
  return s;
}

CpRange parse_range(const cfg::Node& e, const CpShape& shape, std::int64_t previous_max) {
  e.require_map();
  cfg::check_keys(e, range_keys());
  CpRange range;
  range.tokens_min = e.require_int("tokens_min", 1);
  range.tokens_max = e.require_int("tokens_max", range.tokens_min);
  if (range.tokens_min <= previous_max)
    e.fail("tokens_min", "ranges must ascend without overlap: " + std::to_string(range.tokens_min) +
                             " <= the previous range's end " + std::to_string(previous_max));
  if (!e.has("scheme"))
    e.fail("scheme", "required: a scheme, or null where no scheme passed parity");
  if (e.has("default_scheme")) e.get_choice("default_scheme", "", ring::scheme_names());
  if (e.child("scheme").yaml().IsNull()) return range;
  range.scheme = e.get_choice("scheme", "", ring::scheme_names());
  const int R = shape.ring_size;
  const ring::Scheme scheme = ring::scheme_from_string(range.scheme);
  range.ulysses_degree = scheme == ring::Scheme::Ulysses ? R : 1;
  if (scheme == ring::Scheme::Hybrid) {
    range.ulysses_degree = static_cast<int>(e.require_int("ulysses_degree", 2, R));
    if (R % range.ulysses_degree != 0)
      e.fail("ulysses_degree", "hybrid's ulysses_degree " + std::to_string(range.ulysses_degree) +
                                   " must divide the rule's ring_size " + std::to_string(R));
  } else if (e.has("ulysses_degree") && e.require_int("ulysses_degree") != range.ulysses_degree) {
    e.fail("ulysses_degree", "scheme " + range.scheme + " at ring size " + std::to_string(R) +
                                 " splits heads over " + std::to_string(range.ulysses_degree) +
                                 " rank(s)");
  }
  return range;
}

CpRule parse_rule(const cfg::Node& r) {
  r.require_map();
  CpRule rule;
  rule.shape = parse_shape(cfg::KeyReader(r, rule_keys()));
  if (!r.has("ranges"))
    r.fail("ranges", "required: a list of tokens-per-rank ranges and their schemes");
  const cfg::Node ranges = r.child("ranges");
  if (!ranges.is_sequence() || ranges.size() == 0)
    ranges.fail("", "expected a non-empty list of {tokens_min, tokens_max, scheme}");
  std::int64_t previous_max = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    rule.ranges.push_back(parse_range(ranges.element(i), rule.shape, previous_max));
    previous_max = rule.ranges.back().tokens_max;
  }
  return rule;
}

void parse_rules(const cfg::Node& root, CpPolicy& policy) {
  if (!root.has("rules")) root.fail("rules", "required: the tuned rules (a list, one per shape)");
  const cfg::Node rules = root.child("rules");
  if (!rules.is_sequence()) rules.fail("", "expected a list of rules, one per shape");
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const cfg::Node r = rules.element(i);
    CpRule rule = parse_rule(r);
    for (std::size_t j = 0; j < policy.rules.size(); ++j)
      if (policy.rules[j].shape == rule.shape)
        r.fail("", "a second rule for the shape of rules[" + std::to_string(j) +
                       "]; keep one rule per shape");
    policy.rules.push_back(std::move(rule));
  }
}

// Log2 steps from `tokens` to [lo, hi] (0 inside).
double ratio_distance(std::int64_t tokens, std::int64_t lo, std::int64_t hi) {
  if (tokens < lo) return std::log2(double(lo) / double(tokens));
  if (tokens > hi) return std::log2(double(tokens) / double(hi));
  return 0.0;
}

}  // namespace

std::string cp_dilation_text(const std::vector<std::int64_t>& segments,
                             const std::vector<std::int64_t>& rates) {
  if (segments.empty()) return "none";
  std::string out;
  for (std::size_t i = 0; i < segments.size(); ++i)
    out += (i ? ", " : "") + std::to_string(segments[i]) + "/" +
           std::to_string(i < rates.size() ? rates[i] : 1);
  return out;
}

std::string cp_span(int ring_size, int ranks_per_node) {
  return ring_size <= std::max(1, ranks_per_node) ? "node" : "nodes";
}

const CpRange* CpPolicy::pick(const CpShape& shape, std::int64_t tokens) const {
  for (const CpRule& rule : rules) {
    if (!(rule.shape == shape) || rule.ranges.empty()) continue;
    const double beyond =
        ratio_distance(tokens, rule.ranges.front().tokens_min, rule.ranges.back().tokens_max);
    if (beyond > kCpPolicyReach) return nullptr;  // nothing measured near: the built-in rule
    const CpRange* best = nullptr;
    double best_distance = std::numeric_limits<double>::infinity();
    for (const CpRange& r : rule.ranges) {
      const double d = ratio_distance(tokens, r.tokens_min, r.tokens_max);
      if (d < best_distance) {
        best = &r;
        best_distance = d;
      }
    }
    return best->scheme.empty() ? nullptr : best;
  }
  return nullptr;
}

std::shared_ptr<CpPolicyUse> parse_cp_policy_text(const std::string& text,
                                                  const std::string& file) {
  const cfg::Node root(cfg::load_document(text, file), file, "");
  if (!root.is_map())
    root.fail("",
              "expected a tuned CP policy (a map with version, kind, machine, rules) as written by "
              "`rb-analysis tune-cp`");
  static const std::vector<cfg::KeySpec> keys = policy_file_keys({});
  cfg::check_keys(root, keys);
  check_policy_format(root, {"CP policy", kVersion, kKind, "tune-cp"});
  auto use = std::make_shared<CpPolicyUse>();
  use->file = file;
  use->machine = parse_policy_machine(root);
  auto policy = std::make_shared<CpPolicy>();
  policy->file = file;
  policy->sha256 = sha256_hex(text);
  parse_rules(root, *policy);
  use->policy = policy;
  use->source = {policy, file + " (sha256 " + policy->sha256 + ")"};
  return use;
}

std::shared_ptr<CpPolicyUse> parse_cp_policy(const cfg::Node& owner, const std::string& key) {
  const PolicyKey k = read_policy_key(owner, key, "CP policy");
  auto use = parse_cp_policy_text(k.text, k.file);
  use->key = k.key;
  use->where = k.where;
  use->strict = k.strict;
  return use;
}

std::string applicability(const CpPolicyUse& use, const ThisMachine& here) {
  return machine_applicability(use.machine, here);
}

std::string ported_from(const CpPolicyUse& use, const ThisMachine& here) {
  return ported_from(use.machine, here);
}

}  // namespace rb
