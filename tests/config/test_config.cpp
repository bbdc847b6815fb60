// Config module tests: the top-level schema, the typed Node accessors, and a table of
// malformed files that must each fail with the right line and an actionable message.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <mpi.h>

#include "config/config.hpp"
#include "config/node.hpp"
#include "config/text_checks.hpp"
#include "config/yaml_guard.hpp"
#include "expect_error.hpp"
#include "test_support.hpp"

namespace {

using rb::cfg::ConfigError;
using rb::cfg::Node;
using rb::test::expect_error;

// A Node over a YAML snippet, as a sweep parser would see its own map.
Node node_of(const std::string& text, const std::string& path = "sweeps[0]") {
  return Node(YAML::Load(text), "test.yaml", path);
}

// Stands in for a sweep parser: reads every accessor kind from each sweep so the malformed
// table can exercise value errors exactly as they surface to users.
void parse_like_a_sweep(const rb::SweepSpec& spec) {
  const Node& n = spec.node;
  n.allow_only({"type", "name", "ring_sizes", "message_size", "iterations", "causal", "tolerance",
                "mode", "dtypes", "warmup"});
  n.get_int_list("ring_sizes", {2}, 1);
  n.get_bytes("message_size", 1024, 1);
  n.get_int("iterations", 10, 1, 1000000);
  n.get_int("warmup", 2, 0);
  n.get_bool("causal", false);
  n.get_double("tolerance", 1e-3, 0.0, 1.0);
  n.get_choice("mode", "exact", {"exact", "dilated"});
  n.get_choice_list("dtypes", {"fp32"}, {"fp16", "bf16", "fp32"});
}

void load_and_validate(const std::string& text) {
  rb::Config c = rb::parse_config_text(text, "test.yaml");
  for (const rb::SweepSpec& s : c.sweeps) parse_like_a_sweep(s);
}

}  // namespace

TEST_CASE("a full config parses into the expected structs") {
  const std::string text =
      "# a full config\n"
      "run:\n"
      "  name: nightly-2.0_a\n"
      "  output_dir: /scratch/out\n"
      "backend: cuda\n"
      "binding:\n"
      "  policy: gpu-near\n"
      "sweeps:\n"
      "  - type: host_pingpong\n"
      "    message_size: 64 KiB\n"
      "  - type: ring_attention\n"
      "    name: ra_causal\n"
      "    ring_sizes: [2, 4, 8]\n"
      "    causal: yes\n";
  rb::Config c = rb::parse_config_text(text, "full.yaml");
  CHECK(c.file == "full.yaml");
  CHECK(c.text == text);
  CHECK(c.run.name == "nightly-2.0_a");
  CHECK(c.run.output_dir == "/scratch/out");
  CHECK(c.backend == rb::Backend::Cuda);
  CHECK(c.binding.policy == rb::BindingPolicy::GpuNear);
  REQUIRE(c.sweeps.size() == 2);
  CHECK(c.sweeps[0].type == "host_pingpong");
  CHECK(c.sweeps[0].name == "host_pingpong");  // defaults to the type
  CHECK(c.sweeps[0].node.path() == "sweeps[0]");
  CHECK(c.sweeps[0].node.location().line == 9);
  CHECK(c.sweeps[0].node.get_bytes("message_size", 0) == 64 * 1024);
  CHECK(c.sweeps[1].type == "ring_attention");
  CHECK(c.sweeps[1].name == "ra_causal");
  CHECK(c.sweeps[1].node.path() == "sweeps[1]");
  CHECK(c.sweeps[1].node.file() == "full.yaml");
  CHECK(c.sweeps[1].node.get_int_list("ring_sizes", {}, 1) == std::vector<std::int64_t>{2, 4, 8});
  CHECK(c.sweeps[1].node.get_bool("causal", false));
  CHECK(c.sweeps[1].node.keys() ==
        std::vector<std::string>{"type", "name", "ring_sizes", "causal"});
}

TEST_CASE("run time limits: optional, seconds > 0; the point limit auto by default, or off") {
  rb::Config c = rb::parse_config_text(
      "run: {timeout_s: 3600, point_timeout_s: 2.5}\nsweeps: [{type: memory}]\n", "t.yaml");
  CHECK(c.run.timeout_s == 3600.0);
  CHECK(c.run.point_timeout_s == 2.5);
  CHECK_FALSE(c.run.point_timeout_auto);
  rb::Config d = rb::parse_config_text("sweeps: [{type: memory}]\n", "t.yaml");
  CHECK(d.run.timeout_s == 0.0);  // no limit on the run
  CHECK(d.run.point_timeout_s == 0.0);
  CHECK(d.run.point_timeout_auto);  // points: from each sweep's estimate
  rb::Config a =
      rb::parse_config_text("run: {point_timeout_s: auto}\nsweeps: [{type: memory}]\n", "t.yaml");
  CHECK(a.run.point_timeout_auto);
  rb::Config off =
      rb::parse_config_text("run: {point_timeout_s: off}\nsweeps: [{type: memory}]\n", "t.yaml");
  CHECK_FALSE(off.run.point_timeout_auto);
  CHECK(off.run.point_timeout_s == 0.0);
}

TEST_CASE("run.mpiio_hints and run.alignment_bytes: in file order, as text") {
  rb::Config c = rb::parse_config_text(
      "run:\n  mpiio_hints: {striping_factor: 8, romio_cb_write: enable}\n"
      "  alignment_bytes: 4MiB\nsweeps: [{type: memory}]\n",
      "t.yaml");
  using Hints = std::vector<std::pair<std::string, std::string>>;
  CHECK(c.run.mpiio_hints == Hints{{"striping_factor", "8"}, {"romio_cb_write", "enable"}});
  CHECK(c.run.alignment_bytes == 4u << 20);
  rb::Config d = rb::parse_config_text("sweeps: [{type: memory}]\n", "t.yaml");
  CHECK(d.run.mpiio_hints.empty());
  CHECK(d.run.alignment_bytes == 0u);
}

// Issue #31: a value of MPI_MAX_INFO_VAL characters or more passed validation, then MPI_Info_set
// aborted every rank after the output was claimed (a 57-byte file that was not HDF5 was left).
TEST_CASE("run.mpiio_hints: names and values as long as this MPI's MPI_Info takes, no longer") {
  const auto config = [](const std::string& name, const std::string& value) {
    return "run:\n  mpiio_hints:\n    " + name + ": " + value + "\nsweeps: [{type: memory}]\n";
  };
  const std::string longest_name(MPI_MAX_INFO_KEY - 1, 'k'), longest(MPI_MAX_INFO_VAL - 1, 'v');
  const rb::Config ok = rb::parse_config_text(config(longest_name, longest), "t.yaml");
  REQUIRE(ok.run.mpiio_hints.size() == 1);
  CHECK(ok.run.mpiio_hints[0].second == longest);
  const ConfigError value = expect_error(
      [&] { rb::parse_config_text(config("cb_config_list", longest + "v"), "t.yaml"); });
  CHECK(value.where().line == 3);
  CHECK(value.where().column == 21);
  CHECK(value.key() == "run.mpiio_hints.cb_config_list");
  CHECK(value.message() ==
        "MPI-IO hint values are at most " + std::to_string(MPI_MAX_INFO_VAL - 1) +
            " characters (MPI_MAX_INFO_VAL of this MPI), got " + std::to_string(MPI_MAX_INFO_VAL));
  const ConfigError name =
      expect_error([&] { rb::parse_config_text(config(longest_name + "k", "1"), "t.yaml"); });
  CHECK(name.where().line == 3);
  CHECK(name.key() == "run.mpiio_hints." + longest_name + "k");
  CHECK(name.message().find("(MPI_MAX_INFO_KEY of this MPI)") != std::string::npos);
}

TEST_CASE("omitted sections take their defaults") {
  rb::Config c = rb::parse_config_text("sweeps:\n  - type: memory\n", "min.yaml");
  CHECK(c.run.name == rb::RunSection{}.name);
  CHECK(c.run.output_dir == rb::RunSection{}.output_dir);
  CHECK(c.run.name == "ringbench");
  CHECK(c.run.output_dir == "results");
  CHECK(c.backend == rb::Backend::Auto);
  CHECK(c.binding.policy == rb::BindingPolicy::None);
  REQUIRE(c.sweeps.size() == 1);
  CHECK(c.sweeps[0].name == "memory");

  // A section present but partly filled keeps the defaults of what it leaves out.
  rb::Config d = rb::parse_config_text(
      "run: {name: x}\nbinding: {}\nsweeps: [{type: compute}, {type: compute, name: c2}]\n",
      "flow.yaml");
  CHECK(d.run.name == "x");
  CHECK(d.run.output_dir == "results");
  CHECK(d.binding.policy == rb::BindingPolicy::None);
  REQUIRE(d.sweeps.size() == 2);
  CHECK(d.sweeps[1].name == "c2");
}

TEST_CASE("every backend and binding policy parses and prints back") {
  for (rb::Backend b : {rb::Backend::Auto, rb::Backend::Host, rb::Backend::Cuda}) {
    std::string text = std::string("backend: ") + rb::to_string(b) + "\nsweeps: [{type: t}]\n";
    CHECK(rb::parse_config_text(text, "b.yaml").backend == b);
  }
  for (rb::BindingPolicy p : {rb::BindingPolicy::None, rb::BindingPolicy::Core,
                              rb::BindingPolicy::Numa, rb::BindingPolicy::GpuNear}) {
    std::string text =
        std::string("binding:\n  policy: ") + rb::to_string(p) + "\nsweeps: [{type: t}]\n";
    CHECK(rb::parse_config_text(text, "p.yaml").binding.policy == p);
  }
  CHECK(std::string(rb::to_string(rb::BindingPolicy::GpuNear)) == "gpu-near");
  CHECK(std::string(rb::to_string(rb::Backend::Cuda)) == "cuda");
}

TEST_CASE("read_config_file returns the text verbatim") {
  auto file = rb::test::scratch_dir("config") / "ok.yaml";
  const std::string text = "sweeps:\n  - type: p2p_matrix  # trailing comment\n";
  { std::ofstream(file) << text; }
  CHECK(rb::read_config_file(file.string()) == text);
  rb::Config c = rb::parse_config_text(rb::read_config_file(file.string()), file.string());
  CHECK(c.sweeps.at(0).type == "p2p_matrix");
  std::filesystem::remove_all(file.parent_path());
}

TEST_CASE("only a regular file of at most 16 MiB is read: FIFO, device, huge file refused") {
  const std::filesystem::path dir = rb::test::scratch_dir("config");
  const std::string fifo = (dir / "pipe.yaml").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer ever opens the FIFO: a plain fopen would block here forever.
  auto e = expect_error([&] { rb::read_config_file(fifo); });
  CHECK(std::string(e.what()).find("it is a FIFO (named pipe), not a YAML file") !=
        std::string::npos);
  e = expect_error([&] { rb::read_config_file("/dev/zero"); });
  CHECK(std::string(e.what()).find("it is a character device") != std::string::npos);
  const auto big = dir / "big.yaml";
  { std::ofstream touch(big); }
  std::filesystem::resize_file(big, rb::kMaxConfigBytes + 1);
  e = expect_error([&] { rb::read_config_file(big.string()); });
  CHECK(std::string(e.what()).find("at most 16777216 bytes (16 MiB)") != std::string::npos);
  CHECK(e.where().file == big.string());
  std::filesystem::resize_file(big, rb::kMaxConfigBytes);  // exactly the limit is read
  CHECK(rb::read_config_file(big.string()).size() == rb::kMaxConfigBytes);
  std::filesystem::remove_all(dir);
}

TEST_CASE("aliases: ordinary ones parse, a billion-node alias bomb is refused at once") {
  const std::string ok =
      "x: &sizes [1, 2, 4]\nsweeps:\n  - type: ring_attention\n    ring_sizes: *sizes\n";
  CHECK_NOTHROW(rb::cfg::check_yaml_expansion(ok, "ok.yaml"));
  // Ten levels of ten aliases each: 10^10 nodes once expanded, 12 lines of text.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    const std::string p = "*a" + std::to_string(i - 1);
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + p;
    for (int k = 1; k < 10; ++k) bomb += ", " + p;
    bomb += "]\n";
  }
  bomb += "sweeps:\n  - type: memory\n";
  const auto t0 = std::chrono::steady_clock::now();
  const ConfigError e = expect_error([&] { rb::parse_config_text(bomb, "bomb.yaml"); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 1.0);
  const std::string what = e.what();
  CAPTURE(what);
  CHECK(what.find("expands to more than 1000000 YAML nodes") != std::string::npos);
  CHECK(e.where().file == "bomb.yaml");
  CHECK(e.where().line == 6);  // a5's 10^6 nodes take the count past the limit
  // The count is of the expansion: map, key a, [1, 2, 3] (4), key b, list (1), *a (4), *a (4).
  const std::string two = "a: &a [1, 2, 3]\nb: [*a, *a]\n";
  CHECK_NOTHROW(rb::cfg::check_yaml_expansion(two, "t.yaml", 16));
  CHECK_THROWS_AS(rb::cfg::check_yaml_expansion(two, "t.yaml", 15), ConfigError);
}

// Issue #31: `x: &a [*a]` crashed every rank (SIGSEGV: the duplicate-key walk recursed on a node
// that contains itself). Each such alias is refused at its own line and key path.
TEST_CASE("an alias inside the collection its anchor names is refused at its key") {
  struct Case {
    std::string yaml;
    int line, column;
    std::string key, kind;
    int anchor_line;
  };
  const std::string tail = "sweeps:\n  - type: memory\n";
  const std::vector<Case> cases = {
      {"x: &a [*a]\n" + tail, 1, 8, "x[0]", "list", 1},
      {"run:\n  name: r\nx: &loop {b: 1, c: [2, *loop]}\n" + tail, 3, 24, "x.c[1]", "map", 3},
      {tail + "    extra: &m\n      <<: *m\n", 4, 11, "sweeps[0].extra.<<", "map", 3},
      {"x: &a\n  - 1\n  - [2, *a]\n" + tail, 3, 9, "x[1][1]", "list", 1}};
  for (const Case& c : cases) {
    CAPTURE(c.yaml);
    const ConfigError e = expect_error([&] { rb::parse_config_text(c.yaml, "self.yaml"); });
    CHECK(e.where().file == "self.yaml");
    CHECK(e.where().line == c.line);
    CHECK(e.where().column == c.column);
    CHECK(e.key() == c.key);
    CHECK(e.message().find("stands for the " + c.kind + " anchored") != std::string::npos);
    CHECK(e.message().find("' at line " + std::to_string(c.anchor_line) + ",") !=
          std::string::npos);
    CHECK(e.message().find("would contain itself") != std::string::npos);
  }
  // The same anchor repeated after its collection closed is an ordinary alias.
  CHECK_NOTHROW(rb::cfg::load_document("x: &a [1, 2]\ny: [*a, {z: *a}]\n" + tail, "ok.yaml"));
  // A policy file goes through the same reader.
  CHECK_THROWS_AS(rb::cfg::load_document("a: &p {b: *p}\n", "policy.yaml"), ConfigError);
}

// Issue #31 item 16: yaml-cpp does not implement merge keys, so `<<: *a` became an ordinary key
// named '<<' and the sweep failed on "missing required key 'type'". Refused at the '<<'.
TEST_CASE("a YAML merge key '<<' is refused at the key, whatever it merges") {
  struct Case {
    std::string yaml;
    int line, column;
    std::string key;
  };
  const std::vector<Case> cases = {
      {"base: &a {type: memory}\nsweeps:\n  - <<: *a\n    name: m\n", 3, 5, "sweeps[0].<<"},
      {"base: &a {type: memory}\nsweeps:\n  - {name: m, <<: *a}\n", 3, 15, "sweeps[0].<<"},
      {"a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: [*a, *b]\nsweeps: [{type: memory}]\n", 4, 3, "c.<<"},
      {"<<: {sweeps: [{type: memory}]}\n", 1, 1, "<<"}};
  for (const Case& c : cases) {
    CAPTURE(c.yaml);
    const ConfigError e = expect_error([&] { rb::parse_config_text(c.yaml, "merge.yaml"); });
    CHECK(e.where().file == "merge.yaml");
    CHECK(e.where().line == c.line);
    CHECK(e.where().column == c.column);
    CHECK(e.key() == c.key);
    CHECK(e.message() == "YAML merge keys are not supported; write the keys out");
    CHECK(std::string(e.what()).rfind("merge.yaml:" + std::to_string(c.line) + ":" +
                                          std::to_string(c.column) + ": key '" + c.key + "': ",
                                      0) == 0);
  }
  // A quoted '<<' is an ordinary key (YAML merges only the plain one): the unknown-key error.
  const ConfigError quoted = expect_error(
      [&] { rb::parse_config_text("\"<<\": 1\nsweeps: [{type: memory}]\n", "q.yaml"); });
  CHECK(quoted.message().find("merge") == std::string::npos);
  // '<<' as a value is only text.
  CHECK_NOTHROW(rb::cfg::load_document("x: <<\n", "v.yaml"));
}

// Issue #31 item 16: a "\0" in a quoted string reached C strings (a path, MPI_Info_set) and cut
// them short without a word. Refused at the key, for values and for keys alike.
TEST_CASE("a string with a NUL byte is refused at its key") {
  struct Case {
    std::string yaml;
    int line;
    std::string key;
  };
  const std::string tail = "sweeps: [{type: memory}]\n";
  const std::vector<Case> cases = {
      {"run:\n  output_dir: \"/scratch/a\\0b\"\n" + tail, 2, "run.output_dir"},
      {"run:\n  output_dir: \"/scratch/a\\x00\"\n" + tail, 2, "run.output_dir"},
      {"run:\n  mpiio_hints:\n    \"striping\\0_factor\": 8\n" + tail, 3, "run.mpiio_hints"},
      {"run:\n  mpiio_hints: {striping_factor: \"8\\0\"}\n" + tail, 2,
       "run.mpiio_hints.striping_factor"},
      {"sweeps:\n  - {type: memory, name: \"m\\0\"}\n", 2, "sweeps[0].name"}};
  for (const Case& c : cases) {
    CAPTURE(c.yaml);
    const ConfigError e = expect_error([&] { rb::parse_config_text(c.yaml, "nul.yaml"); });
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.where().line == c.line);
    CHECK(e.key() == c.key);
    CHECK(e.message().find("contains a NUL byte") != std::string::npos);
    CHECK(what.find('\0') == std::string::npos);
  }
  // A Node read without the file reader (a sweep's own document) is checked where it is read.
  const rb::cfg::Node n(YAML::Load("dir: \"a\\0b\"\n"), "n.yaml", "");
  const ConfigError e = expect_error([&] { n.get_string("dir", ""); });
  CHECK(e.key() == "dir");
  CHECK(e.message().find("contains a NUL byte") != std::string::npos);
}

TEST_CASE("a config in UTF-16 or UTF-32, or with a raw NUL byte anywhere, is refused") {
  using namespace std::string_literals;
  // YAML reads all of these, but /run config_text keeps the config as a C string: before,
  // such a file ran and its stored text ended at the first zero byte (issue #31, D2).
  const std::string body = "backend: host # a comment\nsweeps: [{type: memory}]\n";
  std::string utf16le = "\xff\xfe", utf16be = "\xfe\xff", utf16le_nobom, utf32le;
  for (const char c : body) {
    utf16le += std::string{c, '\0'};
    utf16be += std::string{'\0', c};
    utf16le_nobom += std::string{c, '\0'};
    utf32le += std::string{c, '\0', '\0', '\0'};
  }
  const std::vector<std::pair<std::string, std::string>> wide = {
      {utf16le, "UTF-16LE encoded (byte-order mark FF FE)"},
      {utf16be, "UTF-16BE encoded (byte-order mark FE FF)"},
      {utf16le_nobom, "UTF-16LE encoded (no byte-order mark"},
      {std::string("\xff\xfe\0\0", 4) + utf32le, "UTF-32LE encoded (byte-order mark FF FE 00 00)"},
      {utf32le, "UTF-32LE encoded (no byte-order mark"}};
  for (const auto& [text, words] : wide) {
    CAPTURE(words);
    const ConfigError e = expect_error([&] { rb::parse_config_text(text, "w.yaml"); });
    const std::string what = e.what();
    CHECK(what.rfind("w.yaml:1:1: the file is ", 0) == 0);
    CHECK(what.find(words) != std::string::npos);
    CHECK(what.find("save it as UTF-8") != std::string::npos);
  }
  const std::vector<std::pair<std::string, std::string>> nul = {
      {"backend: host # a\0b\nsweeps: [{type: memory}]\n"s, "w.yaml:1:18: "},
      {"backend: host\nsweeps: [{type: memory, name: m\0em}]\n"s, "w.yaml:2:32: "},
      {"sweeps: [{type: memory}]\n\0"s, "w.yaml:2:1: "}};
  for (const auto& [text, where] : nul) {
    CAPTURE(where);
    const ConfigError e = expect_error([&] { rb::parse_config_text(text, "w.yaml"); });
    const std::string what = e.what();
    CHECK(what.rfind(where + "a NUL byte (\\0) here", 0) == 0);
    CHECK(what.find('\0') == std::string::npos);
  }
  // Bytes that are not UTF-8, in a comment too: before, such a file ran and its stored text
  // broke the report's decoding (a hostile corpus, issue #31).
  const std::vector<std::pair<std::string, std::string>> not_utf8 = {
      {"backend: host\n# caf\xe9\nsweeps: [{type: memory}]\n", "w.yaml:2:6: byte 0xE9 here"},
      {"backend: host # \xed\xa0\x80\nsweeps: [{type: memory}]\n", "w.yaml:1:17: byte 0xED here"},
      {"backend: host # \xc0\xaf\nsweeps: [{type: memory}]\n", "w.yaml:1:17: byte 0xC0 here"},
      {"backend: host # \xf4\x90\x80\x80\nsweeps: [{type: memory}]\n",
       "w.yaml:1:17: byte 0xF4 here"}};
  for (const auto& [text, start] : not_utf8) {
    CAPTURE(start);
    const ConfigError e = expect_error([&] { rb::parse_config_text(text, "w.yaml"); });
    const std::string what = e.what();
    CHECK(what.rfind(start + " is not UTF-8", 0) == 0);
  }
  // Well-formed multi-byte characters are UTF-8.
  CHECK_NOTHROW(
      rb::parse_config_text("backend: host # caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n"
                            "sweeps: [{type: memory}]\n",
                            "w.yaml"));
  // A UTF-8 byte-order mark is UTF-8: read, and kept verbatim.
  const rb::Config c = rb::parse_config_text("\xef\xbb\xbf" + body, "w.yaml");
  CHECK(c.text == "\xef\xbb\xbf" + body);
}

TEST_CASE("a key longer than YAML's 1024 characters is named at its start, in its map") {
  // yaml-cpp's own words were "end of map flow not found" at the map, or "illegal map value".
  const std::string k(100000, 'k');
  struct Case {
    std::string yaml, where, key;
  };
  const std::vector<Case> cases = {
      {"backend: host\nsweeps:\n  - {type: memory, iterations: 2, " + k + ": 1}\n",
       "t.yaml:3:35: ", "sweeps[0]"},
      {"run:\n  " + k + ": 1\nsweeps: [{type: memory}]\n", "t.yaml:2:3: ", ""},
      {"sweeps:\n  - type: memory\n    \"" + std::string(1023, 'q') + "\": 1\n",
       "t.yaml:3:5: ", ""}};
  for (const Case& c : cases) {
    CAPTURE(c.where);
    const ConfigError e = expect_error([&] { rb::parse_config_text(c.yaml, "t.yaml"); });
    const std::string what = e.what();
    CHECK(what.rfind(c.where, 0) == 0);
    if (!c.key.empty()) CHECK(e.key() == c.key);
    CHECK(e.message().rfind("unknown key longer than 1024 characters (", 0) == 0);
    CHECK(what.size() < 400);
  }
  // Up to the limit a key is read (and refused as unknown by its map, which names it).
  const std::string at_limit = "sweeps:\n  - {type: memory, " + std::string(1024, 'k') + ": 1}\n";
  CHECK(rb::parse_config_text(at_limit, "t.yaml").sweeps.size() == 1);
  // Long values are no YAML problem: only a syntax error is explained by a long key, and a
  // long quoted value with ': ' inside is not taken for one.
  CHECK_FALSE(rb::cfg::find_overlong_key("a: \"" + k + ": x\"\n").has_value());
  CHECK_FALSE(rb::cfg::find_overlong_key("a: " + k + " # b: c\n").has_value());
  CHECK(rb::cfg::find_overlong_key("a: [x, " + k + ": 1]\n")->column == 8);
  // One pass over a line: two million blanks before a key take milliseconds, not hours.
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(rb::cfg::find_overlong_key(std::string(2'000'000, ' ') + k + ": 1\n")->length == 100000);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
}

TEST_CASE("run.name and sweep names are at most 128 characters") {
  const std::string tail = "sweeps: [{type: memory}]\n";
  CHECK_NOTHROW(rb::parse_config_text("run: {name: " + std::string(128, 'r') + "}\n" + tail, "n"));
  ConfigError e = expect_error(
      [&] { rb::parse_config_text("run: {name: " + std::string(129, 'r') + "}\n" + tail, "n"); });
  CHECK(e.key() == "run.name");
  CHECK(e.message().rfind("expected a name of at most 128 characters, got 129 ('rrr", 0) == 0);
  e = expect_error([&] {
    rb::parse_config_text("sweeps: [{type: memory, name: " + std::string(100000, 'm') + "}]\n",
                          "n");
  });
  CHECK(e.key() == "sweeps[0].name");
  CHECK(std::string(e.what()).size() < 200);
}

// ---- the malformed-config table ----

struct BadCase {
  const char* what;
  std::string yaml;             // the config text (ignored when `path` is set)
  int line;                     // expected 1-based line; 0 = no line (whole-file errors)
  std::vector<std::string> in;  // substrings the one-line message must contain
  std::string path = "";        // read this file instead of parsing `yaml`
};

TEST_CASE("malformed configs fail with the line and an actionable message") {
  const std::string S = "sweeps:\n  - type: ring_attention\n";  // a valid prefix, lines 1-2
  const std::filesystem::path dir = rb::test::scratch_dir("config");
  const std::vector<BadCase> cases = {
      {"syntax: unclosed flow list",
       S + "    ring_sizes: [1, 2\n    causal: true\n",
       4,
       {"YAML syntax error", "end of sequence flow not found"}},
      {"syntax: bad indentation",
       "run:\n  name: a\n output_dir: b\nsweeps: [{type: t}]\n",
       3,
       {"YAML syntax error"}},
      {"syntax: tab indentation",
       "run:\n\tname: a\nsweeps: [{type: t}]\n",
       2,
       {"YAML syntax error"}},
      // yaml-cpp lets an unclosed quote run to the end of the file (no error, or one at the
      // last line): the message names the line and column where the quote opens.
      {"syntax: unterminated double quote",
       S + "    mode: \"exact\n    causal: true\n  - type: t\n",
       3,
       {"test.yaml:3:11:", "unterminated quoted string", "add the closing \""}},
      {"syntax: unterminated single quote",
       "run:\n  name: 'it''s\n" + S,
       2,
       {"test.yaml:2:9:", "unterminated quoted string", "the ' opened here"}},
      {"syntax: unterminated quote in a flow map",
       "run: {name: \"abc}\n" + S + "    causal: true\n",
       1,
       {"test.yaml:1:13:", "unterminated quoted string"}},
      {"wrong type: string for int",
       S + "    iterations: abc\n",
       3,
       {"key 'sweeps[0].iterations'", "expected an integer between 1 and 1000000", "got 'abc'"}},
      {"wrong type: map for list",
       S + "    ring_sizes: {a: 1}\n",
       3,
       {"key 'sweeps[0].ring_sizes'", "non-empty list", "got a map"}},
      {"wrong type: list for scalar",
       S + "    iterations: [1, 2]\n",
       3,
       {"key 'sweeps[0].iterations'", "expected an integer", "got a list"}},
      {"negative byte size",
       S + "    message_size: -2\n",
       3,
       {"key 'sweeps[0].message_size'", "expected a byte size", "got '-2'"}},
      {"zero byte size",
       S + "    message_size: 0\n",
       3,
       {"key 'sweeps[0].message_size'", "expected a byte size >= 1, got 0"}},
      {"zero in a size list",
       S + "    ring_sizes: [2, 4, 0]\n",
       3,
       {"key 'sweeps[0].ring_sizes[2]'", "expected an integer >= 1, got 0"}},
      {"negative scalar size",
       S + "    ring_sizes: -2\n",
       3,
       {"key 'sweeps[0].ring_sizes'", "expected an integer >= 1, got -2"}},
      {"unknown top-level key",
       "sweep:\n  - type: t\n",
       1,
       {"unknown key 'sweep'", "did you mean 'sweeps'?"}},
      {"unknown top-level key without suggestion",
       "frobnicate: 1\n" + S,
       1,
       {"key 'frobnicate'", "unknown key",
        "expected one of: run, backend, binding, kernel_policy, sweeps"}},
      {"unknown key inside binding",
       "binding:\n  polcy: core\n" + S,
       2,
       {"key 'binding.polcy'", "unknown key 'polcy'; did you mean 'policy'?"}},
      {"unknown key inside run",
       "run:\n  outptu_dir: x\n" + S,
       2,
       {"key 'run.outptu_dir'", "did you mean 'output_dir'?"}},
      {"unknown key inside a sweep",
       S + "    ring_size: [2]\n",
       3,
       {"key 'sweeps[0].ring_size'", "did you mean 'ring_sizes'?"}},
      {"missing sweeps", "backend: host\n", 1, {"missing required key 'sweeps'"}},
      {"empty sweeps list",
       "backend: host\nsweeps: []\n",
       2,
       {"key 'sweeps'", "expected a non-empty list of sweeps", "got an empty list"}},
      {"sweeps is a map", "sweeps:\n  type: t\n", 2, {"key 'sweeps'", "got a map"}},
      {"sweep is a scalar",
       "sweeps:\n  - type: t\n  - compute\n",
       3,
       {"key 'sweeps[1]'", "expected a map with a 'type' key", "got the scalar 'compute'"}},
      {"sweep without type",
       "sweeps:\n  - type: t\n  - name: second\n    ring_sizes: 2\n",
       3,
       {"key 'sweeps[1]'", "missing required key 'type'"}},
      {"duplicate sweep names",
       S + "    name: x\n  - type: compute\n    name: x\n",
       5,
       {"key 'sweeps[1].name'", "duplicate sweep name 'x'", "sweeps[0] (line 3)",
        "sweeps[1] (line 5)"}},
      {"duplicate default sweep names",
       "sweeps:\n  - type: memory\n  - type: memory\n",
       3,
       {"key 'sweeps[1]'", "duplicate sweep name 'memory'", "line 2", "line 3"}},
      {"run.mpiio_hints a list",
       "run:\n  mpiio_hints: [cb_nodes]\n" + S,
       2,
       {"key 'run.mpiio_hints'", "expected a map of MPI-IO hint names", "got a list"}},
      {"run.mpiio_hints value a map",
       "run:\n  mpiio_hints:\n    cb_nodes: {a: 1}\n" + S,
       3,
       {"key 'run.mpiio_hints.cb_nodes'", "expected a value", "got a map"}},
      {"run.mpiio_hints name too long",
       "run:\n  mpiio_hints:\n    a_hint_name_longer_than_open_mpi_takes: 1\n" + S,
       3,
       {"key 'run.mpiio_hints.a_hint_name_longer_than_open_mpi_takes'", "1 to 35 characters"}},
      {"run.alignment_bytes not a size",
       "run:\n  alignment_bytes: lots\n" + S,
       2,
       {"key 'run.alignment_bytes'"}},
      {"zero run.point_timeout_s",
       "run:\n  point_timeout_s: 0\n" + S,
       2,
       {"key 'run.point_timeout_s'", "expected a number of seconds > 0, got 0"}},
      {"run.point_timeout_s a word",
       "run:\n  point_timeout_s: never\n" + S,
       2,
       {"key 'run.point_timeout_s'", "expected a number of seconds > 0, auto or off, got never"}},
      {"negative run.timeout_s",
       "run:\n  name: a\n  timeout_s: -5\n" + S,
       3,
       {"key 'run.timeout_s'", "expected a number of seconds > 0, got -5"}},
      {"run.timeout_s not a number",
       "run:\n  timeout_s: 10min\n" + S,
       2,
       {"key 'run.timeout_s'", "expected a number", "got '10min'"}},
      {"bad run.name characters",
       "run:\n  name: my run\n" + S,
       2,
       {"key 'run.name'", "letters, digits", "got 'my run'", "' ' at position 3"}},
      {"bad sweep name characters",
       S + "    name: a/b\n",
       3,
       {"key 'sweeps[0].name'", "got 'a/b'"}},
      {"empty file", "", 0, {"the file is empty; expected a map with a 'sweeps' list"}},
      {"comments-only file", "# nothing here\n\n   # still nothing\n", 0, {"the file is empty"}},
      {"missing file",
       "",
       0,
       {"cannot read the file", "No such file or directory"},
       (dir / "does-not-exist.yaml").string()},
      {"directory as file", "", 0, {"cannot read the file", "directory"}, dir.string()},
      {"bad backend choice",
       "backend: cdua\n" + S,
       1,
       {"key 'backend'", "expected one of auto|host|cuda, got 'cdua'", "did you mean 'cuda'?"}},
      {"backend with the wrong case",
       "backend: Host\n" + S,
       1,
       {"got 'Host'", "did you mean 'host'?"}},
      {"bad byte suffix",
       S + "    message_size: 64 mb\n",
       3,
       {"key 'sweeps[0].message_size'", "got 'mb' in '64 mb'", "did you mean 'MB'?"}},
      {"unknown byte suffix",
       S + "    message_size: 64XB\n",
       3,
       {"expected a byte-size suffix B|KiB|MiB|GiB|TiB|KB|MB|GB", "got 'XB'"}},
      {"float for int",
       S + "    iterations: 3.5\n",
       3,
       {"key 'sweeps[0].iterations'", "expected an integer", "got 3.5"}},
      {"bool for int",
       S + "    iterations: true\n",
       3,
       {"key 'sweeps[0].iterations'", "expected an integer", "got 'true'"}},
      {"quoted number for int",
       S + "    warmup: \"5\"\n",
       3,
       {"key 'sweeps[0].warmup'", "got the string \"5\"", "remove the quotes"}},
      {"empty list",
       S + "    ring_sizes: []\n",
       3,
       {"key 'sweeps[0].ring_sizes'", "non-empty list", "got an empty list"}},
      {"nested list",
       S + "    ring_sizes: [2, [4, 8]]\n",
       3,
       {"key 'sweeps[0].ring_sizes[1]'", "got a list", "lists do not nest"}},
      {"duplicate top-level key",
       "backend: host\n" + S + "backend: cuda\n",
       4,
       {"key 'backend'", "duplicate key 'backend'", "lines 1 and 4"}},
      {"duplicate key inside a sweep",
       S + "    iterations: 5\n    iterations: 6\n",
       4,
       {"key 'sweeps[0].iterations'", "lines 3 and 4"}},
      {"out-of-range int",
       S + "    iterations: 2000000\n",
       3,
       {"expected an integer between 1 and 1000000, got 2000000"}},
      {"int beyond 64 bits",
       S + "    warmup: 99999999999999999999\n",
       3,
       {"key 'sweeps[0].warmup'", "does not fit in 64 bits"}},
      {"null value",
       S + "    iterations:\n    causal: true\n",
       3,
       {"key 'sweeps[0].iterations'", "got an empty value (null)"}},
      {"null binding section",
       "binding:\n" + S,
       1,
       {"key 'binding'", "expected a map", "got an empty value (null)"}},
      {"bad bool",
       S + "    causal: maybe\n",
       3,
       {"key 'sweeps[0].causal'", "expected true or false, got 'maybe'"}},
      {"double out of range",
       S + "    tolerance: 1.5\n",
       3,
       {"key 'sweeps[0].tolerance'", "expected a number between 0 and 1, got 1.5"}},
      {"bad element in a choice list",
       S + "    dtypes: [fp16, bf61]\n",
       3,
       {"key 'sweeps[0].dtypes[1]'", "expected one of fp16|bf16|fp32, got 'bf61'",
        "did you mean 'bf16'?"}},
      {"document is a list",
       "- type: t\n- type: u\n",
       1,
       {"expected a map with a 'sweeps' list at the top level, got a list"}},
      {"two documents", S + "---\n" + S, 4, {"expected one YAML document, got 2"}},
  };
  REQUIRE(cases.size() >= 25);

  for (const BadCase& c : cases) {
    const std::string name = c.what;
    CAPTURE(name);
    CAPTURE(c.yaml);
    ConfigError e = expect_error([&] {
      if (c.path.empty())
        load_and_validate(c.yaml);
      else
        rb::parse_config_text(rb::read_config_file(c.path), c.path);
    });
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.where().line == c.line);
    CHECK(what.find('\n') == std::string::npos);
    const std::string file = c.path.empty() ? "test.yaml" : c.path;
    CHECK(e.where().file == file);
    if (c.line > 0) {
      CHECK(what.rfind(file + ":" + std::to_string(c.line) + ":", 0) == 0);
      CHECK(e.where().column >= 1);
    } else {
      CHECK(what.rfind(file + ": ", 0) == 0);
    }
    for (const std::string& s : c.in) {
      CAPTURE(s);
      CHECK(what.find(s) != std::string::npos);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("quoted strings: closed ones parse, the opening of an unclosed one is found") {
  using rb::cfg::quote_is_closed;
  CHECK(quote_is_closed("\"a\"", 0));
  CHECK(quote_is_closed("\"a\\\"b\" x", 0));   // \" is escaped, the last " closes
  CHECK_FALSE(quote_is_closed("\"a\\\"", 0));  // only an escaped quote
  CHECK(quote_is_closed("'it''s' x", 0));
  CHECK_FALSE(quote_is_closed("'it''s", 0));
  CHECK(quote_is_closed("'a\\'", 0));  // no escapes in single quotes
  CHECK_FALSE(quote_is_closed("\"multi\nline", 0));
  // Quotes that close on a later line, quotes inside plain scalars and anchored quoted
  // scalars are fine.
  const std::string ok =
      "run:\n  name: \"a\"\n  output_dir: \"two\n    lines\"\n"
      "sweeps:\n  - {type: t, x: don't, y: &q 'a''b', z: *q, w: !!str \"v\"}\n";
  CHECK_NOTHROW(rb::parse_config_text(ok, "ok.yaml"));
  const ConfigError e = expect_error(
      [] { rb::parse_config_text("sweeps:\n  - {type: t, y: &q 'open}\n", "t.yaml"); });
  CHECK(e.where().line == 2);
  CHECK(e.where().column == 21);  // the quote, after the anchor
}

// ---- accessors on their own ----

TEST_CASE("ConfigError formats one line: FILE:LINE:COL: key 'KEY': MESSAGE") {
  CHECK(std::string(ConfigError({"a.yaml", 3, 7}, "sweeps[1].ring_sizes", "boom").what()) ==
        "a.yaml:3:7: key 'sweeps[1].ring_sizes': boom");
  CHECK(std::string(ConfigError({"a.yaml", 0, 0}, "", "cannot read").what()) ==
        "a.yaml: cannot read");
  CHECK(std::string(ConfigError({"a.yaml", 2, 1}, "", "x").what()) == "a.yaml:2:1: x");
  // Bytes that are not UTF-8 and control characters are shown escaped; UTF-8 stays as it is.
  CHECK(std::string(ConfigError({"a.yaml", 2, 9}, "run.name",
                                "got 'a\xff\xfe\x01"
                                "b' \xe2\x86\x92 na\xc3\xafve")
                        .what()) ==
        "a.yaml:2:9: key 'run.name': got 'a\\xFF\\xFE\\x01b' \xe2\x86\x92 na\xc3\xafve");
  CHECK(std::string(ConfigError({"a.yaml", 0, 0}, "", "cut \xe2\x86").what()) ==
        "a.yaml: cut \\xE2\\x86");
  ConfigError e({"f", 1, 2}, "k", "m");
  CHECK(e.key() == "k");
  CHECK(e.message() == "m");
  CHECK(e.where().column == 2);
}

TEST_CASE("get_int validates integer scalars and ranges") {
  Node n = node_of(
      "a: 42\nb: -7\nc: 0x10\nd: +3\ne: 010\nf: 3.5\ng: abc\nh: true\n"
      "i: [1]\nj: {x: 1}\nk:\nl: \"5\"\n");
  CHECK(n.get_int("a", 0) == 42);
  CHECK(n.get_int("b", 0) == -7);
  CHECK(n.get_int("c", 0) == 16);
  CHECK(n.get_int("d", 0) == 3);
  CHECK(n.get_int("e", 0) == 10);  // decimal, not octal
  CHECK(n.get_int("missing", 99) == 99);
  CHECK(n.require_int("a", 42, 42) == 42);
  for (const char* bad : {"f", "g", "h", "i", "j", "k", "l"}) {
    CAPTURE(bad);
    ConfigError e = expect_error([&] { n.get_int(bad, 0); });
    CHECK(e.key() == std::string("sweeps[0].") + bad);
    CHECK(e.message().find("expected an integer") == 0);
  }
  ConfigError low = expect_error([&] { n.get_int("b", 0, 1); });
  CHECK(low.message() == "expected an integer >= 1, got -7");
  CHECK(low.where().line == 2);
  CHECK(low.where().column == 4);
  ConfigError high = expect_error([&] { n.get_int("a", 0, INT64_MIN, 10); });
  CHECK(high.message() == "expected an integer <= 10, got 42");
  ConfigError missing = expect_error([&] { n.require_int("zz"); });
  CHECK(missing.message() == "missing required key 'zz'");
  CHECK(missing.where().line == 1);  // the enclosing map

  Node extremes = node_of(
      "lo: -9223372036854775808\nhi: 9223372036854775807\n"
      "over: 9223372036854775808\n");
  CHECK(extremes.get_int("lo", 0) == INT64_MIN);
  CHECK(extremes.get_int("hi", 0) == INT64_MAX);
  CHECK(expect_error([&] { extremes.get_int("over", 0); }).message().find("64 bits") !=
        std::string::npos);
}

TEST_CASE("an empty value is reported at its key's line, not the next token's") {
  Node n = node_of("first: 1\nempty:\n\n\nlast: 2\n");
  ConfigError e = expect_error([&] { n.get_int("empty", 0); });
  CHECK(e.where().line == 2);
  CHECK(e.message() == "expected an integer, got an empty value (null)");
  CHECK(n.child("empty").location().line == 2);
}

TEST_CASE("get_bytes accepts integers and binary/decimal suffixes") {
  Node n = node_of(
      "plain: 4096\nb: 12B\nkib: 64KiB\nmib: 64 MiB\ngib: 2GiB\ntib: 1 TiB\nkb: 1KB\n"
      "mb: 3 MB\ngb: 2GB\nquoted: \"8 KiB\"\nzero: 0\nmax: 16777215 TiB\n"
      "over: 16777216 TiB\nlower: 4kib\nspaces: 4  KiB\nfrac: 1.5GiB\nneg: -1\nlist: [1]\n");
  CHECK(n.get_bytes("plain", 0) == 4096);
  CHECK(n.get_bytes("b", 0) == 12);
  CHECK(n.get_bytes("kib", 0) == 64ULL << 10);
  CHECK(n.get_bytes("mib", 0) == 64ULL << 20);
  CHECK(n.get_bytes("gib", 0) == 2ULL << 30);
  CHECK(n.get_bytes("tib", 0) == 1ULL << 40);
  CHECK(n.get_bytes("kb", 0) == 1000);
  CHECK(n.get_bytes("mb", 0) == 3000000);
  CHECK(n.get_bytes("gb", 0) == 2000000000ULL);
  CHECK(n.get_bytes("quoted", 0) == 8192);
  CHECK(n.get_bytes("zero", 5) == 0);
  CHECK(n.get_bytes("max", 0) == 16777215ULL << 40);
  CHECK(n.get_bytes("absent", 123) == 123);
  CHECK(expect_error([&] { n.get_bytes("over", 0); }).message().find("does not fit in 64 bits") !=
        std::string::npos);
  CHECK(expect_error([&] { n.get_bytes("lower", 0); }).message().find("did you mean 'KiB'?") !=
        std::string::npos);
  for (const char* bad : {"spaces", "frac", "neg", "list"}) {
    CAPTURE(bad);
    ConfigError e = expect_error([&] { n.get_bytes(bad, 0); });
    CHECK(e.key() == std::string("sweeps[0].") + bad);
  }
  ConfigError small = expect_error([&] { n.get_bytes("kib", 0, 1ULL << 20); });
  CHECK(small.message() == "expected a byte size >= 1048576, got '64KiB' (65536 bytes)");
}

TEST_CASE("get_int_list takes a scalar or a list of scalars") {
  Node n = node_of(
      "one: 4\nmany: [1, 2, 3]\nblock:\n  - 8\n  - 16\nempty: []\n"
      "nested: [1, [2]]\nmap: {a: 1}\nbad: [1, x, 3]\nnull_el: [1, ~]\n");
  CHECK(n.get_int_list("one", {}) == std::vector<std::int64_t>{4});
  CHECK(n.get_int_list("many", {}) == std::vector<std::int64_t>{1, 2, 3});
  CHECK(n.get_int_list("block", {}, 1, 16) == std::vector<std::int64_t>{8, 16});
  CHECK(n.get_int_list("absent", {7, 9}) == std::vector<std::int64_t>{7, 9});
  CHECK(expect_error([&] { n.get_int_list("empty", {}); }).key() == "sweeps[0].empty");
  ConfigError nested = expect_error([&] { n.get_int_list("nested", {}); });
  CHECK(nested.key() == "sweeps[0].nested[1]");
  CHECK(nested.where().column == 13);
  CHECK(expect_error([&] { n.get_int_list("map", {}); }).message().find("got a map") !=
        std::string::npos);
  ConfigError bad = expect_error([&] { n.get_int_list("bad", {}); });
  CHECK(bad.key() == "sweeps[0].bad[1]");
  CHECK(bad.message() == "expected an integer, got 'x'");
  CHECK(expect_error([&] { n.get_int_list("null_el", {}); }).key() == "sweeps[0].null_el[1]");
  ConfigError range = expect_error([&] { n.get_int_list("block", {}, 1, 10); });
  CHECK(range.key() == "sweeps[0].block[1]");
  CHECK(range.where().line == 5);
  CHECK(range.message() == "expected an integer between 1 and 10, got 16");
}

// Issue #31: a list of ~8200 values or more validated and planned, then aborted every rank when
// its sweep wrote it as an HDF5 attribute (64 KiB at most).
TEST_CASE("a list holds at most kMaxListValues values, refused at its key") {
  const auto list_of = [](std::size_t n, const std::string& value) {
    std::string text = "name: x\nsizes: [";
    for (std::size_t i = 0; i < n; ++i) text += (i ? ", " : "") + value;
    return text + "]\n";
  };
  const std::size_t most = rb::cfg::kMaxListValues;
  CHECK(most * 8 < 65536);  // room left in the 64 KiB attribute for its name and types
  CHECK(node_of(list_of(most, "7")).get_int_list("sizes", {}).size() == most);
  CHECK(node_of(list_of(most, "a")).get_choice_list("sizes", {}, {"a", "b"}).size() == most);
  for (const std::string value : {"7", "a"}) {
    const Node n = node_of(list_of(most + 1, value));
    const ConfigError e = expect_error([&] {
      if (value == "7")
        n.get_int_list("sizes", {});
      else
        n.get_choice_list("sizes", {}, {"a", "b"});
    });
    CHECK(e.key() == "sweeps[0].sizes");
    CHECK(e.where().line == 2);
    CHECK(e.where().column == 8);
    CHECK(e.message().find("a list may hold at most " + std::to_string(most) + " values, got " +
                           std::to_string(most + 1)) == 0);
    CHECK(e.message().find("64 KiB") != std::string::npos);
  }
}

TEST_CASE("get_choice and get_choice_list are case-sensitive with suggestions") {
  Node n = node_of(
      "mode: dilated\ntypo: dilatde\ncase: Exact\nfar: zzz\nlist: [exact, dilated]\n"
      "one: exact\n");
  const std::vector<std::string> modes = {"exact", "dilated"};
  CHECK(n.get_choice("mode", "exact", modes) == "dilated");
  CHECK(n.get_choice("absent", "exact", modes) == "exact");
  CHECK(expect_error([&] { n.get_choice("typo", "", modes); }).message() ==
        "expected one of exact|dilated, got 'dilatde'; did you mean 'dilated'?");
  CHECK(expect_error([&] { n.get_choice("case", "", modes); }).message() ==
        "expected one of exact|dilated, got 'Exact'; did you mean 'exact'?");
  CHECK(expect_error([&] { n.get_choice("far", "", modes); }).message() ==
        "expected one of exact|dilated, got 'zzz'");
  CHECK(n.get_choice_list("list", {}, modes) == modes);
  CHECK(n.get_choice_list("one", {}, modes) == std::vector<std::string>{"exact"});
}

TEST_CASE("get_double, get_bool and get_string") {
  Node n = node_of(
      "d: 2.5\ni: 3\ne: 1e-3\nbad: 1.2.3\nnan: .nan\nt: true\ny: yes\noff: off\n"
      "maybe: maybe\nqt: \"true\"\ns: hello\nnum: 123\nseq: [a]\nnul: ~\n");
  CHECK(n.get_double("d", 0) == 2.5);
  CHECK(n.get_double("i", 0) == 3.0);
  CHECK(n.get_double("e", 0) == doctest::Approx(1e-3));
  CHECK(n.get_double("absent", 0.25) == 0.25);
  CHECK(expect_error([&] { n.get_double("bad", 0); }).message() == "expected a number, got 1.2.3");
  CHECK(expect_error([&] { n.get_double("nan", 0); }).key() == "sweeps[0].nan");
  CHECK(expect_error([&] { n.get_double("d", 0, 0, 1); }).message() ==
        "expected a number between 0 and 1, got 2.5");
  CHECK(n.get_bool("t", false));
  CHECK(n.get_bool("y", false));
  CHECK_FALSE(n.get_bool("off", true));
  CHECK(n.get_bool("absent", true));
  CHECK(expect_error([&] { n.get_bool("maybe", false); }).message() ==
        "expected true or false, got 'maybe'");
  CHECK(expect_error([&] { n.get_bool("qt", false); }).message().find("remove the quotes") !=
        std::string::npos);
  CHECK(n.get_string("s", "") == "hello");
  CHECK(n.get_string("num", "") == "123");
  CHECK(n.require_string("s") == "hello");
  CHECK(expect_error([&] { n.get_string("seq", ""); }).message() ==
        "expected a string, got a list");
  CHECK(expect_error([&] { n.get_string("nul", ""); }).message() ==
        "expected a string, got an empty value (null)");
}

TEST_CASE("map helpers: has, child, element, keys, allow_only, fail") {
  Node n = node_of("a: 1\nsub:\n  x: 1\n  y: 2\nlist: [10, 20]\n", "sweeps[3]");
  CHECK(n.has("a"));
  CHECK_FALSE(n.has("zz"));
  CHECK(n.keys() == std::vector<std::string>{"a", "sub", "list"});
  Node sub = n.child("sub");
  CHECK(sub.path() == "sweeps[3].sub");
  CHECK(sub.get_int("y", 0) == 2);
  Node list = n.child("list");
  CHECK(list.is_sequence());
  CHECK(list.size() == 2);
  CHECK(list.element(1).path() == "sweeps[3].list[1]");
  CHECK(list.element(1).location().column == 12);
  CHECK(expect_error([&] { list.element(2); }).message().find("out of range") != std::string::npos);
  CHECK_NOTHROW(n.allow_only({"a", "sub", "list"}));
  ConfigError unknown = expect_error([&] { n.allow_only({"a", "subs", "lists"}); });
  CHECK(unknown.key() == "sweeps[3].sub");
  CHECK(unknown.message() == "unknown key 'sub'; did you mean 'subs'?");
  CHECK(unknown.where().line == 2);
  ConfigError dup = expect_error([&] { node_of("a: 1\nb: 2\na: 3\n").allow_only({"a", "b"}); });
  CHECK(dup.where().line == 3);
  CHECK(dup.message().find("lines 1 and 3") != std::string::npos);
  ConfigError at_value = expect_error([&] { n.fail("list", "nope"); });
  CHECK(at_value.key() == "sweeps[3].list");
  CHECK(at_value.where().line == 5);
  CHECK(at_value.where().column == 7);
  ConfigError at_map = expect_error([&] { n.fail("", "whole sweep"); });
  CHECK(at_map.key() == "sweeps[3]");
  CHECK(expect_error([&] { n.child("a").require_map(); }).message() == "expected a map, got 1");
}

TEST_CASE("a default-constructed Node yields the fallbacks") {
  Node absent;
  CHECK(absent.get_int("x", 5) == 5);
  CHECK(absent.get_bytes("x", 64) == 64);
  CHECK(absent.get_string("x", "s") == "s");
  CHECK(absent.get_int_list("x", {1, 2}) == std::vector<std::int64_t>{1, 2});
  CHECK_FALSE(absent.has("x"));
}

TEST_CASE("did_you_mean suggests only plausible typos") {
  const std::vector<std::string> keys = {"ring_sizes", "message_sizes", "iterations", "causal"};
  CHECK(rb::cfg::did_you_mean("ring_size", keys) == "ring_sizes");
  CHECK(rb::cfg::did_you_mean("iteratoins", keys) == "iterations");
  CHECK(rb::cfg::did_you_mean("Causal", keys) == "causal");
  CHECK(rb::cfg::did_you_mean("message-size", keys) == "message_sizes");
  CHECK(rb::cfg::did_you_mean("banana", keys) == "");
  CHECK(rb::cfg::did_you_mean("", keys) == "");
  CHECK(rb::cfg::did_you_mean("x", {"y"}) == "");
  CHECK(rb::cfg::did_you_mean("gpu", {"auto", "host", "cuda"}) == "");
  // The limit grows with the word: 4 edits are fine for a 12-letter word, not a 6-letter one.
  CHECK(rb::cfg::did_you_mean("abcdefghijkl", {"abcdefghWXYZ"}) == "abcdefghWXYZ");
  CHECK(rb::cfg::did_you_mean("abcdef", {"abWXYZ"}) == "");
}
