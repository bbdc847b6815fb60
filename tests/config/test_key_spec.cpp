// Key tables (config/key_spec.hpp): a map read through its table takes the table's defaults
// (per backend) through the same accessors as a value in the file, refuses keys the table lacks,
// accepts the long dtype names for the short ones, and --help's text says each key's type,
// default and limits.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "config/key_spec.hpp"
#include "test_support.hpp"

namespace {

using rb::cfg::KeyReader;
using rb::cfg::KeySpec;
using rb::cfg::Node;
namespace key = rb::cfg::key;

Node node_of(const std::string& text) {
  return Node(YAML::Load(text), "test.yaml", "sweeps[0]");
}

const std::vector<KeySpec>& table() {
  static const std::vector<KeySpec> keys = rb::cfg::sweep_keys(
      "example", {key::integer("warmup", "5", 0, 100, "untimed calls"),
                  key::bytes("bytes", "1MiB", 4096, "buffer size").on_cuda("64MiB"),
                  key::integer("sizes", "[8, 16]", 1, 1 << 20, "sizes").or_list(),
                  key::dtype("dtypes", "[fp32]", {"fp32", "bf16"}, "types").or_list(),
                  key::choice("mode", "exact", {"exact", "dilated"}, "mode"),
                  key::integer("heads", "", 1, 64, "heads").computed("num_heads"),
                  key::map("inner", {key::flag("on", "true", "switch")}, "a nested map")});
  return keys;
}

}  // namespace

TEST_CASE("a key's default comes from its table, per backend, through the same checks") {
  const Node empty = node_of("{type: example}");
  const KeyReader host(empty, table(), rb::Backend::Host);
  CHECK(host.integer("warmup") == 5);
  CHECK(host.bytes("bytes") == (1u << 20));
  CHECK(host.integers("sizes") == std::vector<std::int64_t>{8, 16});
  CHECK(host.dtypes("dtypes") == std::vector<std::string>{"fp32"});
  CHECK(host.choice("mode") == "exact");
  CHECK(host.integer("heads", 7) == 7);  // computed by the parser
  CHECK(host.map("inner").flag("on"));
  CHECK(KeyReader(empty, table(), rb::Backend::Cuda).bytes("bytes") == (64u << 20));

  const KeyReader given(node_of("{warmup: 9, bytes: 8KiB, heads: 3, inner: {on: false}}"), table());
  CHECK(given.integer("warmup") == 9);
  CHECK(given.bytes("bytes") == 8192);
  CHECK(given.integer("heads", 7) == 3);
  CHECK(!given.map("inner").flag("on"));
}

TEST_CASE("a value outside its key's spec is refused with the accessors' own message") {
  const auto error = [](const std::string& yaml, auto read) {
    return rb::test::error_of([&] { read(KeyReader(node_of(yaml), table())); });
  };
  CHECK(error("{warmup: 101}", [](const KeyReader& r) { r.integer("warmup"); })
            .find("key 'sweeps[0].warmup': expected an integer between 0 and 100, got 101") !=
        std::string::npos);
  CHECK(error("{heads: 0}", [](const KeyReader& r) {
          r.integer("heads", 1);
        }).find("between 1 and 64") != std::string::npos);
  CHECK(error("{warmpu: 1}", [](const KeyReader&) {
        }).find("unknown key 'warmpu'; did you mean 'warmup'?") != std::string::npos);
  CHECK(error("{inner: {of: 1}}", [](const KeyReader& r) {
          r.map("inner");
        }).find("key 'sweeps[0].inner.of': unknown key 'of'") != std::string::npos);
  CHECK(error("{inner: 3}", [](const KeyReader& r) { r.map("inner"); }).find("expected a map") !=
        std::string::npos);
}

TEST_CASE("a dtype is its short name however it is spelled; others get both vocabularies") {
  const KeyReader r(node_of("{dtypes: [float32, bf16, bfloat16]}"), table());
  CHECK(r.dtypes("dtypes") == std::vector<std::string>{"fp32", "bf16", "bf16"});
  const std::string bad =
      rb::test::error_of([] { KeyReader(node_of("{dtypes: [fp16]}"), table()).dtypes("dtypes"); });
  CHECK(bad.find("expected one of fp32|bf16 (or float32|bfloat16), got 'fp16'") !=
        std::string::npos);
  const std::string typo = rb::test::error_of(
      [] { KeyReader(node_of("{dtypes: bfloat61}"), table()).dtypes("dtypes"); });
  CHECK(typo.find("did you mean 'bfloat16'?") != std::string::npos);
}

TEST_CASE("--help's text: each key with its type, default and limits, nested keys dotted") {
  const std::string text = rb::cfg::describe_keys(table());
  CHECK(text.find("  warmup: integer, default 5; 0 .. 100\n      untimed calls\n") !=
        std::string::npos);
  CHECK(text.find("  bytes: byte size, default 64MiB (cuda), 1MiB (host); >= 4096\n") !=
        std::string::npos);
  CHECK(text.find("  dtypes: dtype or list, default [fp32]; fp32|bf16 (or float32|bfloat16)\n") !=
        std::string::npos);
  CHECK(text.find("  heads: integer, default num_heads; 1 .. 64\n") != std::string::npos);
  CHECK(text.find("  inner: map, default its keys' defaults\n") != std::string::npos);
  CHECK(text.find("  inner.on: bool, default true\n") != std::string::npos);
  CHECK(text.find("  type: string, default required\n") != std::string::npos);
}

TEST_CASE("check() reads a key's value or default as its type: a bad default is caught") {
  const std::vector<KeySpec> bad = {key::integer("x", "200", 0, 100, "x"),
                                    key::dtype("t", "fp8", {"fp32"}, "t").or_list()};
  const Node empty = node_of("{}");
  CHECK(rb::test::error_of([&] { KeyReader(empty, bad).check("x"); }).find("between 0 and 100") !=
        std::string::npos);
  CHECK(rb::test::error_of([&] { KeyReader(empty, bad).check("t"); }).find("got 'fp8'") !=
        std::string::npos);
  CHECK(rb::test::error_of([&] { KeyReader(node_of("{x: 5}"), bad).check("x"); }).empty());
}
