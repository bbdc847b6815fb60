#pragma once
// `scheme: auto` and its tuned CP policy (`cp_policy:` in a ring_attention sweep): which
// context-parallel scheme (ring, allgather, ulysses, hybrid) to run at a shape, measured by a
// ring_attention sweep over several schemes and written by `rb-analysis tune-cp`
// (docs/analysis.md, "The CP policy file"). A rule per shape (dtype, head dim, heads, K/V heads,
// causal, layout, dilation, ring size, and whether the group spans one node or several) holds
// ranges of tokens per rank (S / ring size) and the scheme measured fastest there. Without a
// policy, or far from what it measured, `auto` runs the ring (the built-in rule).
//
// A helper of the ring_attention sweep: the file reader (config errors name the policy file, key
// and line) and the lookup; whether the file applies to this machine is decided by the driver,
// as for the kernel policy.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/node.hpp"
#include "config/policy_file.hpp"

namespace rb {

// The shape a CP scheme is chosen for; tokens per rank are the lookup's axis.
struct CpShape {
  std::string dtype;  // fp32 | fp16 | bf16
  int head_dim = 0, num_heads = 0, num_kv_heads = 0;
  bool causal = false;
  std::string layout;    // contiguous | zigzag | striped
  std::string dilation;  // "none", or "SEGMENT/RATE, ..." of the LongNet branches
  int ring_size = 0;     // ranks in the context-parallel group
  std::string span;      // node: the group inside one node; nodes: across nodes
  bool operator==(const CpShape& o) const {
    return dtype == o.dtype && head_dim == o.head_dim && num_heads == o.num_heads &&
           num_kv_heads == o.num_kv_heads && causal == o.causal && layout == o.layout &&
           dilation == o.dilation && ring_size == o.ring_size && span == o.span;
  }
};

// The dilation text of a CpShape from a sweep's LongNet branches.
std::string cp_dilation_text(const std::vector<std::int64_t>& segments,
                             const std::vector<std::int64_t>& rates);
// "node" when a group of `ring_size` ranks fits one node of `ranks_per_node`, else "nodes".
std::string cp_span(int ring_size, int ranks_per_node);

struct CpRange {
  std::int64_t tokens_min = 0, tokens_max = 0;  // inclusive, tokens per rank
  std::string scheme;      // empty: no scheme passed parity there (built-in rule)
  int ulysses_degree = 1;  // hybrid's degree (ulysses: the ring size; 1 otherwise)
};

struct CpRule {
  CpShape shape;
  std::vector<CpRange> ranges;  // ascending, non-overlapping
};

// How far beyond a rule's measured tokens per rank (log2 steps) it still decides: a factor 2.
constexpr double kCpPolicyReach = 1.0;

struct CpPolicy {
  std::string file, sha256;
  std::vector<CpRule> rules;
  // The range deciding a point, or nullptr (no rule for the shape, tokens beyond reach, or a
  // range where no scheme passed parity): the built-in rule (ring). Between two ranges the
  // nearer by ratio decides (a tie: the lower).
  const CpRange* pick(const CpShape& shape, std::int64_t tokens) const;
};

// What `scheme: auto` follows, recorded with every point: "FILE (sha256 HEX)", or
// "built-in (FILE not applied: why)", or "built-in" without a file.
struct CpPolicySource {
  std::shared_ptr<const CpPolicy> policy;  // null: the built-in rule
  std::string description = "built-in";
};

// One `cp_policy:` key and the file it names (as KernelPolicyUse for kernel_policy).
struct CpPolicyUse {
  std::string key;
  cfg::Location where;
  std::string file;
  bool strict = false;
  PolicyMachine machine;
  std::shared_ptr<const CpPolicy> policy;
  CpPolicySource source;  // set by the driver once it knows the machine
};

// Reads `owner.key`: `FILE` or `{file: FILE, strict: BOOL}`. Throws cfg::ConfigError.
std::shared_ptr<CpPolicyUse> parse_cp_policy(const cfg::Node& owner, const std::string& key);
// The policy from its text (exposed for tests); `file` names it in errors.
std::shared_ptr<CpPolicyUse> parse_cp_policy_text(const std::string& text, const std::string& file);

// Whether the file applies here: "" or why not (device, GPU model or architecture, cuDNN).
std::string applicability(const CpPolicyUse& use, const ThisMachine& here);
std::string ported_from(const CpPolicyUse& use, const ThisMachine& here);

}  // namespace rb
