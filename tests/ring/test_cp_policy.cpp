// scheme: auto and its tuned CP policy (issue #27 item 4): the policy file reader (each refusal
// names the file, the key inside it and the line), the lookup over tokens per rank, and the
// ring_attention sweep resolving scheme: auto from it.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/node.hpp"
#include "config/expect_error.hpp"
#include "host_sweep.hpp"
#include "sweeps/cp_policy.hpp"
#include "sweeps/ring_attention.hpp"
#include "sweeps/sweep.hpp"

namespace {

constexpr const char* kFile = "/policies/cp.yaml";

// A CP policy as `rb-analysis tune-cp` writes it: one shape (fp32, d 16, 4 heads, contiguous,
// ring size 4 in one node): tokens 128..256 ring, 512..1024 ulysses, 4096 null.
std::string cp_policy() {
  return "version: 1\n"
         "kind: ringbench-cp-policy\n"
         "machine: {device: host, gpu: null, cudnn: null}\n"
         "source: schemes.h5\n"
         "sweep: schemes\n"
         "margin: 1.05\n"
         "hysteresis: 1\n"
         "rules:\n"
         "- dtype: fp32\n"
         "  head_dim: 16\n"
         "  num_heads: 4\n"
         "  num_kv_heads: 4\n"
         "  causal: false\n"
         "  layout: contiguous\n"
         "  dilation: none\n"
         "  ring_size: 4\n"
         "  span: node\n"
         "  ranges:\n"
         "  - {tokens_min: 128, tokens_max: 256, scheme: ring, default_scheme: ring, speedup: "
         "1.0}\n"
         "  - {tokens_min: 512, tokens_max: 1024, scheme: ulysses, ulysses_degree: 4, "
         "default_scheme: ring, speedup: 1.3}\n"
         "  - {tokens_min: 4096, tokens_max: 4096, scheme: null, default_scheme: ring, speedup: "
         "null}\n";
}

std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "the test policy has no '" << from << "'");
  return text.replace(at, from.size(), to);
}

int line_of(const std::string& text, const std::string& needle) {
  const std::size_t at = text.find(needle);
  REQUIRE(at != std::string::npos);
  int line = 1;
  for (std::size_t i = 0; i < at; ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}

void check_refused(const std::string& text, const std::string& key, int line,
                   const std::string& says) {
  CAPTURE(text);
  const rb::cfg::ConfigError e =
      rb::test::expect_error([&] { rb::parse_cp_policy_text(text, kFile); });
  CAPTURE(std::string(e.what()));
  CHECK(e.where().file == kFile);
  CHECK(e.key() == key);
  CHECK(e.where().line == line);
  CHECK(std::string(e.what()).find(says) != std::string::npos);
}

rb::CpShape shape() {
  rb::CpShape s;
  s.dtype = "fp32";
  s.head_dim = 16;
  s.num_heads = s.num_kv_heads = 4;
  s.layout = "contiguous";
  s.dilation = "none";
  s.ring_size = 4;
  s.span = "node";
  return s;
}

std::string picked(const rb::CpPolicy& p, const rb::CpShape& s, std::int64_t tokens) {
  const rb::CpRange* r = p.pick(s, tokens);
  return r == nullptr ? "built-in" : r->scheme;
}

}  // namespace

TEST_CASE("CP policy file: a valid policy parses into rules and ranges") {
  const auto use = rb::parse_cp_policy_text(cp_policy(), kFile);
  REQUIRE(use->policy != nullptr);
  CHECK(use->machine.device == "host");
  const rb::CpPolicy& p = *use->policy;
  REQUIRE(p.rules.size() == 1);
  CHECK(p.rules[0].shape == shape());
  REQUIRE(p.rules[0].ranges.size() == 3);
  CHECK(p.rules[0].ranges[1].scheme == "ulysses");
  CHECK(p.rules[0].ranges[1].ulysses_degree == 4);
  CHECK(p.rules[0].ranges[2].scheme.empty());
  CHECK(use->source.description == std::string(kFile) + " (sha256 " + p.sha256 + ")");
}

TEST_CASE("CP policy file: refusals name the key and line") {
  const std::string ok = cp_policy();
  check_refused(with(ok, "version: 1", "version: 2"), "version", 1, "reads CP policy version 1");
  check_refused(with(ok, "ringbench-cp-policy", "ringbench-kernel-policy"), "kind", 2,
                "rb-analysis tune-cp");
  const std::string typo = with(ok, "scheme: ulysses,", "scheme: ulyses,");
  check_refused(typo, "rules[0].ranges[1].scheme", line_of(typo, "ulyses"),
                "did you mean 'ulysses'");
  const std::string degree =
      with(ok, "scheme: ulysses, ulysses_degree: 4", "scheme: ulysses, ulysses_degree: 2");
  check_refused(degree, "rules[0].ranges[1].ulysses_degree", line_of(degree, "ulysses_degree: 2"),
                "splits heads over 4 rank(s)");
  const std::string hybrid =
      with(ok, "scheme: ulysses, ulysses_degree: 4", "scheme: hybrid, ulysses_degree: 3");
  check_refused(hybrid, "rules[0].ranges[1].ulysses_degree", line_of(hybrid, "ulysses_degree: 3"),
                "must divide the rule's ring_size 4");
  const std::string overlap = with(ok, "tokens_min: 512", "tokens_min: 256");
  check_refused(overlap, "rules[0].ranges[1].tokens_min",
                line_of(overlap, "tokens_min: 256, tokens_max: 1024"),
                "ranges must ascend without overlap");
  const std::string no_span = with(ok, "  span: node\n", "");
  check_refused(no_span, "rules[0].span", line_of(no_span, "- dtype"), "required in every rule");
  const std::string span = with(ok, "span: node", "span: rack");
  check_refused(span, "rules[0].span", line_of(span, "span: rack"), "expected one of node|nodes");
  const std::string rule = ok.substr(ok.find("- dtype"));
  check_refused(ok + rule, "rules[1]", line_of(ok + rule, "ranges:") + 4,
                "a second rule for the shape of rules[0]");
}

// Hostile corpus (issue #31, D6): cp_policy naming /etc/shadow quoted its first line as an
// unknown key. Until the file is a map with `kind`, nothing of it is shown.
TEST_CASE("CP policy file: a file that is not a policy is refused without its content") {
  for (const std::string text :
       {std::string("root:$6$SECRETHASH:19000:0:99999:7:::\n"),
        std::string("secret_key: SECRETVALUE\nother: 1\n"), std::string("[SECRET, list\n")}) {
    CAPTURE(text);
    const rb::cfg::ConfigError e =
        rb::test::expect_error([&] { rb::parse_cp_policy_text(text, kFile); });
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("SECRET") == std::string::npos);
    CHECK(
        what.find("not a tuned CP policy: expected a YAML map with 'kind: ringbench-cp-policy'") !=
        std::string::npos);
    CHECK(what.find("(the file's content is not shown)") != std::string::npos);
  }
}

TEST_CASE(
    "CpPolicy::pick: inside, between by ratio, within a factor 2 beyond, null, other shapes") {
  const auto use = rb::parse_cp_policy_text(cp_policy(), kFile);
  const rb::CpPolicy& p = *use->policy;
  CHECK(picked(p, shape(), 128) == "ring");
  CHECK(picked(p, shape(), 1024) == "ulysses");
  CHECK(picked(p, shape(), 362) == "ring");       // nearer 256 by ratio
  CHECK(picked(p, shape(), 363) == "ulysses");    // nearer 512
  CHECK(picked(p, shape(), 2048) == "ulysses");   // as far from 1024 as from 4096: the lower
  CHECK(picked(p, shape(), 3000) == "built-in");  // nearer the null range
  CHECK(picked(p, shape(), 64) == "ring");        // a factor 2 below the first range: in reach
  CHECK(picked(p, shape(), 63) == "built-in");
  CHECK(picked(p, shape(), 8192) == "built-in");  // null range's reach, and null
  rb::CpShape other = shape();
  other.span = "nodes";
  CHECK(picked(p, other, 512) == "built-in");
  other = shape();
  other.num_kv_heads = 2;
  CHECK(picked(p, other, 512) == "built-in");
  other = shape();
  other.ring_size = 2;
  CHECK(picked(p, other, 512) == "built-in");
}

TEST_CASE("cp_span and cp_dilation_text") {
  CHECK(rb::cp_span(4, 4) == "node");
  CHECK(rb::cp_span(8, 4) == "nodes");
  CHECK(rb::cp_dilation_text({}, {}) == "none");
  CHECK(rb::cp_dilation_text({2048, 4096}, {1, 2}) == "2048/1, 4096/2");
}

namespace {

rb::SweepSpec ring_spec(const std::string& yaml, const std::string& config) {
  return rbtest::sweep_spec("ring_attention", "ra", yaml, config);
}

rb::ParseContext host_world() {
  return rbtest::host_context(4);
}

}  // namespace

TEST_CASE("ring_attention: scheme: auto follows the CP policy by tokens per rank, else the ring") {
  const rbtest::ConfigFolder folder("cp", "cp.yaml", cp_policy());
  const std::string& config = folder.config;
  // Ring size 4: S 512 -> 128 tokens (ring), 2048 -> 512 (ulysses), 16384 -> 4096 (null:
  // built-in). Ring size 2 has no rule: built-in.
  const auto sweep = rb::parse_ring_attention(
      ring_spec("{seq_lengths: [512, 2048, 16384], ring_sizes: [2, 4], num_heads: 4, head_dim: 16,"
                " dtype: fp32, scheme: auto, cp_policy: cp.yaml}",
                config),
      host_world());
  const std::vector<std::string> plan = sweep->plan();
  REQUIRE(plan.size() == 6);
  CHECK(plan[0].find("auto:ring S=512 R=2") != std::string::npos);
  CHECK(plan[1].find("auto:ring S=512 R=4") != std::string::npos);
  CHECK(plan[3].find("auto:ulysses S=2048 R=4") != std::string::npos);
  CHECK(plan[5].find("auto:ring S=16384 R=4") != std::string::npos);
  REQUIRE(sweep->cp_policies().size() == 1);
  CHECK(sweep->cp_policies()[0]->key == "sweeps[0].cp_policy");
}

TEST_CASE(
    "ring_attention: cp_policy without scheme: auto, and a policy choice that cannot run, are "
    "errors") {
  const rbtest::ConfigFolder folder("cp", "cp.yaml", cp_policy());
  const rb::cfg::ConfigError ring = rbtest::ring_config_error(
      "{seq_lengths: [512], num_heads: 4, head_dim: 16, scheme: ring,\n cp_policy: cp.yaml}",
      folder.config, 4);
  CHECK(ring.key() == "sweeps[0].cp_policy");
  CHECK(ring.where().line == 2);
  CHECK(ring.message().find("steers scheme: auto") != std::string::npos);
  // The policy says ulysses at 512 tokens on 4 ranks; a 4-head rule read for 6 heads would not
  // match, so use a policy whose rule says 6 heads: ulysses cannot split 6 heads over 4 ranks.
  std::ofstream(folder.dir / "cp6.yaml")
      << with(cp_policy(), "num_heads: 4\n  num_kv_heads: 4", "num_heads: 6\n  num_kv_heads: 6");
  const rb::cfg::ConfigError six = rbtest::ring_config_error(
      "{seq_lengths: [2048], ring_sizes: [4], num_heads: 6, head_dim: 16,\n"
      " dtype: fp32, scheme: auto, cp_policy: cp6.yaml}",
      folder.config, 4);
  CHECK(six.key() == "sweeps[0].cp_policy");
  CHECK(six.message().find("ulysses at ring size 4") != std::string::npos);
}
