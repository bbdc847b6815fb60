// Tuned kernel policy read-back (issue #13): the sha256 a run records, the policy file reader
// (every refusal names the POLICY file, the key inside it and the line), the lookup rule
// (KernelPolicy::pick, KernelPicker), applicability to this machine, and `kernel_policy:` in a
// config (paths relative to the config file, strict, a missing file).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "config/node.hpp"
#include "config/policy_file.hpp"
#include "config/sha256.hpp"
#include "kernel_paths.hpp"
#include "kernel_policy.hpp"
#include "expect_error.hpp"
#include "policy_text.hpp"
#include "test_support.hpp"

namespace {

using rb::attn::DType;
using rb::cfg::ConfigError;
using rb::test::expect_error;

constexpr const char* kFile = "/policies/host_tuned.yaml";

// A host policy as `rb-analysis tune` writes it: tuned at batch 1, 2 heads; one rule (fp32,
// d 16, exact), ranges 32..64 kokkos, 256..512 materialized, 1024 null (no path passed parity).
std::string host_policy() {
  return "version: 2\n"
         "kind: ringbench-kernel-policy\n"
         "machine:\n"
         "  device: host\n"
         "  gpu: null\n"
         "  cuda_driver: null\n"
         "  cuda_runtime: null\n"
         "  cudnn: null\n"
         "  ringbench_version: 0.1.0\n"
         "  commit: 0123456789ab\n"
         "source: tune.h5\n"
         "sweep: tuning\n"
         "date: '2026-11-23'\n"
         "margin: 1.2\n"
         "hysteresis: 1\n"
         "grid: {batch: 1, num_heads: 2}\n"
         "rules:\n" +
         std::string(rb::test::kHostPolicyRule) +
         "  - block_rows_min: 32\n"
         "    block_rows_max: 64\n"
         "    path: kokkos\n"
         "    default_path: kokkos\n"
         "    speedup: 1.0\n"
         "  - block_rows_min: 256\n"
         "    block_rows_max: 512\n"
         "    path: materialized\n"
         "    default_path: kokkos\n"
         "    speedup: 1.3\n"
         "  - block_rows_min: 1024\n"
         "    block_rows_max: 1024\n"
         "    path: null\n"
         "    default_path: kokkos\n"
         "    speedup: null\n";
}

// The same format tuned on an H200 with cuDNN 9.14.0, naming the flash row.
std::string cuda_policy(int head_dim = 128, const std::string& path = "flash") {
  return "version: 2\n"
         "kind: ringbench-kernel-policy\n"
         "grid: {batch: 1, num_heads: 8}\n"
         "machine: {device: cuda, gpu: NVIDIA H200, cuda_driver: '13.0', cuda_runtime: '13.0',\n"
         "          cudnn: 9.14.0, ringbench_version: 0.1.0, commit: 0123456789ab}\n"
         "rules:\n"
         "- {dtype: bf16, head_dim: " +
         std::to_string(head_dim) +
         ", causal: false, segment: 0, rate: 0,\n"
         "   ranges: [{block_rows_min: 512, block_rows_max: 4096, path: " +
         path + "}]}\n";
}

// `text` with the first occurrence of `from` replaced by `to` (REQUIREs that it is there).
std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "the test policy has no '" << from << "'");
  return text.replace(at, from.size(), to);
}

// 1-based line of the `nth` (0-based) occurrence of `needle` in `text`.
int line_of(const std::string& text, const std::string& needle, int nth = 0) {
  std::size_t at = text.find(needle);
  for (int i = 0; i < nth && at != std::string::npos; ++i) at = text.find(needle, at + 1);
  REQUIRE_MESSAGE(at != std::string::npos, "no '" << needle << "' in the test policy");
  int line = 1;
  for (std::size_t i = 0; i < at; ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}

// A refusal of policy `text`: it names the policy file, `key` and `line`, and says `says`.
void check_refused(const std::string& text, const std::string& key, int line,
                   const std::vector<std::string>& says) {
  CAPTURE(text);
  const ConfigError e = expect_error([&] { rb::parse_kernel_policy_text(text, kFile); });
  const std::string what = e.what();
  CAPTURE(what);
  CHECK(e.where().file == kFile);
  CHECK(e.key() == key);
  CHECK(e.where().line == line);
  CHECK(what.rfind(std::string(kFile) + ":" + std::to_string(line) + ":", 0) == 0);
  for (const std::string& s : says) {
    CAPTURE(s);
    CHECK(what.find(s) != std::string::npos);
  }
}

const rb::attn::KernelPath* host_row(const char* name) {
  const rb::attn::KernelPath* row = rb::attn::find_kernel_path(name, rb::attn::Device::Host);
  REQUIRE(row != nullptr);
  return row;
}

// What the policy picks for an fp32 d16 block of `rows` rows (queries and keys), batch 1.
const rb::attn::KernelPath* pick(const rb::attn::KernelPolicy& p, std::int64_t rows, int heads = 2,
                                 std::int64_t segment = 0, std::int64_t rate = 1,
                                 bool causal = false, int head_dim = 16, DType dtype = DType::F32) {
  rb::attn::Dims dims;
  dims.heads = heads;
  dims.head_dim = head_dim;
  dims.q_rows = dims.kv_rows = rows;
  rb::attn::Pattern pattern;
  pattern.causal = causal;
  pattern.segment = segment;
  pattern.rate = rate;
  return p.pick(dtype, dims, pattern);
}

std::filesystem::path scratch_dir() {
  const auto dir = rb::test::scratch_dir("policy");
  std::filesystem::create_directories(dir / "policies");
  return dir;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace

// ---- sha256 ----

TEST_CASE("sha256_hex: the FIPS 180-4 vectors") {
  CHECK(rb::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(rb::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the length no longer fits the first block's padding.
  CHECK(rb::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("sha256_hex: 1000 bytes with the high bit set agree with sha256sum") {
  // Bytes (31 i + 7) mod 256: several blocks, and bytes >= 0x80 (a signed char would bite).
  // Expected value from: python3 -c "import sys; sys.stdout.buffer.write(bytes((i*31+7)%256
  //   for i in range(1000)))" | sha256sum
  std::string bytes;
  for (int i = 0; i < 1000; ++i) bytes.push_back(static_cast<char>((i * 31 + 7) % 256));
  CHECK(rb::sha256_hex(bytes) ==
        "5097e7d587352f5097062ae679f37bda5802d9f875aba14c8cb4d1a188ada179");
}

// ---- reading a policy file ----

TEST_CASE("policy file: a valid host policy parses into its rules and rows") {
  const std::string text = host_policy();
  const auto use = rb::parse_kernel_policy_text(text, kFile);
  REQUIRE(use != nullptr);
  REQUIRE(use->policy != nullptr);
  CHECK(use->file == kFile);
  CHECK(use->machine.device == "host");
  CHECK(use->machine.gpu == "");  // null in the file
  CHECK(use->machine.commit == "0123456789ab");
  const rb::attn::KernelPolicy& p = *use->policy;
  CHECK(p.device == rb::attn::Device::Host);
  CHECK(p.file == kFile);
  CHECK(p.sha256 == rb::sha256_hex(text));
  CHECK(p.grid_batch == 1);
  CHECK(p.grid_heads == 2);
  REQUIRE(p.rules.size() == 1);
  CHECK(p.rules[0].shape.dtype == DType::F32);
  CHECK(p.rules[0].shape.head_dim == 16);
  CHECK_FALSE(p.rules[0].shape.causal);
  CHECK(p.rules[0].shape.segment == 0);
  REQUIRE(p.rules[0].ranges.size() == 3);
  const auto& r = p.rules[0].ranges;
  CHECK((r[0].rows_min == 32 && r[0].rows_max == 64 && r[0].row == host_row("kokkos")));
  CHECK((r[1].rows_min == 256 && r[1].rows_max == 512 && r[1].row == host_row("materialized")));
  CHECK((r[2].rows_min == 1024 && r[2].rows_max == 1024 && r[2].row == nullptr));
  CHECK(p.names("materialized"));
  CHECK_FALSE(p.names("flash"));
  // Until the driver decides, auto follows the file, named with its sha256.
  CHECK(use->source.policy == use->policy);
  CHECK(use->source.description == std::string(kFile) + " (sha256 " + p.sha256 + ")");
}

TEST_CASE("policy file: wrong version, wrong kind, missing machine or device") {
  const std::string ok = host_policy();
  check_refused(with(ok, "version: 2", "version: 3"), "version", 1,
                {"reads kernel policy version 2", "the file is version 3"});
  // Version 1 (keyed on segment and rate names only) is refused with what to do.
  check_refused(with(ok, "version: 2", "version: 1"), "version", 1,
                {"does not say the batch and heads it was tuned at", "rb-analysis tune"});
  const std::string no_grid = with(ok, "grid: {batch: 1, num_heads: 2}\n", "");
  check_refused(no_grid, "grid", 1, {"required: the tuning sweep's {batch, num_heads}"});
  const std::string bad_grid = with(ok, "num_heads: 2", "num_heads: 0");
  check_refused(bad_grid, "grid.num_heads", line_of(bad_grid, "grid:"), {"num_heads"});
  check_refused(with(ok, "kind: ringbench-kernel-policy", "kind: ringbench-config"), "kind", 2,
                {"expected 'ringbench-kernel-policy'", "rb-analysis tune"});
  // A missing key is reported at the map that lacks it.
  std::string no_machine = ok.substr(0, ok.find("machine:")) + ok.substr(ok.find("source:"));
  check_refused(no_machine, "machine", 1, {"required: where the policy was tuned"});
  const std::string no_device = with(ok, "  device: host\n", "");
  check_refused(no_device, "machine.device", line_of(no_device, "  gpu: null"),
                {"required: host or cuda"});
  const std::string bad_device = with(ok, "device: host", "device: hots");
  check_refused(bad_device, "machine.device", 4, {"did you mean 'host'?"});
}

TEST_CASE("policy file: an unknown path name, or a path that cannot run the rule's blocks") {
  const std::string typo = with(host_policy(), "path: materialized", "path: materialised");
  check_refused(typo, "rules[0].ranges[1].path", line_of(typo, "path: materialised"),
                {"unknown kernel path 'materialised' for device host", "kokkos, materialized",
                 "did you mean 'materialized'?"});
  // A CUDA row in a host policy is unknown on that device, not silently accepted.
  const std::string other_device = with(host_policy(), "    path: kokkos", "    path: flash");
  check_refused(other_device, "rules[0].ranges[0].path", line_of(other_device, "    path: flash"),
                {"unknown kernel path 'flash' for device host"});
  // Every path takes head dims up to 256 (kernel_paths.cpp): 512 is beyond all of them.
  const std::string wide = with(host_policy(), "head_dim: 16", "head_dim: 512");
  check_refused(wide, "rules[0].ranges[0].path", line_of(wide, "    path: kokkos"),
                {"kernel path 'kokkos' cannot run this rule's blocks"});
  const std::string wide_cuda = cuda_policy(512, "flash");
  check_refused(wide_cuda, "rules[0].ranges[0].path", line_of(wide_cuda, "path: flash"),
                {"kernel path 'flash' cannot run this rule's blocks"});
  // A wrong default_path is refused too (it is only informative, but a typo is a bad file).
  const std::string bad_default =
      with(host_policy(), "default_path: kokkos", "default_path: kokos");
  check_refused(bad_default, "rules[0].ranges[0].default_path",
                line_of(bad_default, "default_path:"), {"did you mean 'kokkos'?"});
}

TEST_CASE("policy file: ranges must ascend without overlap") {
  const std::string overlap = with(host_policy(), "block_rows_min: 256", "block_rows_min: 64");
  check_refused(overlap, "rules[0].ranges[1].block_rows_min",
                line_of(overlap, "block_rows_min: 64"),
                {"ranges must ascend without overlap", "64 <= the previous range's end 64"});
  const std::string descending =
      with(with(host_policy(), "block_rows_min: 1024", "block_rows_min: 128"),
           "block_rows_max: 1024", "block_rows_max: 128");
  check_refused(descending, "rules[0].ranges[2].block_rows_min",
                line_of(descending, "block_rows_min: 128"),
                {"128 <= the previous range's end 512"});
  // A range whose end is below its start.
  const std::string inverted = with(host_policy(), "block_rows_max: 64", "block_rows_max: 16");
  check_refused(inverted, "rules[0].ranges[0].block_rows_max",
                line_of(inverted, "block_rows_max: 16"), {"got 16"});
}

TEST_CASE("policy file: a second rule for one shape, an inconsistent segment and rate") {
  const std::string ok = host_policy();
  const std::string rule = ok.substr(ok.find("- dtype: fp32"));
  const std::string twice = ok + rule;
  check_refused(twice, "rules[1]", line_of(twice, "- dtype: fp32", 1),
                {"a second rule for the shape of rules[0]"});
  // A second rule that differs only in causal is another shape: accepted.
  CHECK(rb::parse_kernel_policy_text(ok + with(rule, "causal: false", "causal: true"), kFile)
            ->policy->rules.size() == 2);
  const std::string not_dividing =
      with(with(ok, "segment: 0", "segment: 32"), "rate: 0", "rate: 3");
  check_refused(not_dividing, "rules[0].rate", line_of(not_dividing, "rate: 3"),
                {"segment 32, rate 3", "rate >= 1 dividing segment"});
  const std::string rate_only = with(ok, "rate: 0", "rate: 2");
  check_refused(rate_only, "rules[0].rate", line_of(rate_only, "rate: 2"), {"segment 0, rate 2"});
}

TEST_CASE("policy file: unknown keys, YAML syntax errors and duplicate keys") {
  const std::string ok = host_policy();
  const std::string rule_typo = with(ok, "  head_dim: 16", "  head_dims: 16");
  check_refused(rule_typo, "rules[0].head_dims", line_of(rule_typo, "head_dims"),
                {"unknown key 'head_dims'; did you mean 'head_dim'?"});
  const std::string range_typo = with(ok, "    speedup: 1.3", "    spedup: 1.3");
  check_refused(range_typo, "rules[0].ranges[1].spedup", line_of(range_typo, "spedup"),
                {"did you mean 'speedup'?"});
  const std::string top_typo = with(ok, "margin: 1.2", "margins: 1.2");
  check_refused(top_typo, "margins", line_of(top_typo, "margins"), {"did you mean 'margin'?"});
  const std::string tab = with(ok, "  device: host", "\tdevice: host");
  check_refused(tab, "", line_of(tab, "\tdevice"), {"YAML syntax error"});
  const std::string dup = ok + "version: 2\n";
  check_refused(
      dup, "version", line_of(dup, "version: 2", 1),
      {"duplicate key 'version'", "lines 1 and " + std::to_string(line_of(dup, "version: 2", 1))});
  const std::string dup_in_range =
      with(ok, "    path: materialized\n", "    path: materialized\n    path: kokkos\n");
  check_refused(dup_in_range, "rules[0].ranges[1].path",
                line_of(dup_in_range, "    path: kokkos", 1), {"duplicate key 'path'"});
}

// ---- the lookup rule ----

TEST_CASE("KernelPolicy::pick: inside a range, between ranges, within reach, null, other kinds") {
  const auto use = rb::parse_kernel_policy_text(host_policy(), kFile);
  const rb::attn::KernelPolicy& p = *use->policy;
  const auto* kokkos = host_row("kokkos");
  const auto* mat = host_row("materialized");
  // Inside (bounds inclusive).
  CHECK(pick(p, 32) == kokkos);
  CHECK(pick(p, 64) == kokkos);
  CHECK(pick(p, 256) == mat);
  CHECK(pick(p, 300) == mat);
  // Between 64 and 256: 128 is as far from both (tie: the range first in the file), 129 is
  // nearer 256.
  CHECK(pick(p, 127) == kokkos);
  CHECK(pick(p, 128) == kokkos);
  CHECK(pick(p, 129) == mat);
  // Between 512 and 1024 (null: no path passed parity): nearer 512 -> materialized, nearer
  // 1024 -> the built-in rule.
  CHECK(pick(p, 700) == mat);
  CHECK(pick(p, 800) == nullptr);
  CHECK(pick(p, 1024) == nullptr);
  // Beyond the grid: a block half the smallest (rows and keys: two log2 steps) is in reach, a
  // smaller one is not.
  CHECK(pick(p, 16) == kokkos);
  CHECK(pick(p, 15) == nullptr);
  // Other heads: 4 and 8 heads per call are one and two steps from the tuned 2.
  CHECK(pick(p, 300, 4) == mat);
  CHECK(pick(p, 300, 8) == mat);
  CHECK(pick(p, 300, 16) == nullptr);
  CHECK(pick(p, 256, 1) == mat);
  // Steps add up over the axes: 16 rows (two steps below 32) is in reach at the tuned 2 heads,
  // not at 4 (one more step).
  CHECK(pick(p, 16, 2) == kokkos);
  CHECK(pick(p, 16, 4) == nullptr);
  // No rule of the kind: causal, dilated, another head dim or dtype.
  CHECK(pick(p, 300, 2, 0, 1, true) == nullptr);
  CHECK(pick(p, 300, 2, 32, 2) == nullptr);
  CHECK(pick(p, 300, 2, 0, 1, false, 32) == nullptr);
  CHECK(pick(p, 300, 2, 0, 1, false, 16, DType::BF16) == nullptr);
}

// A GPU-style policy of LongNet rules tuned at 8 heads: the kernel shapes they measured decide
// for branches the sweep never named (issue #28: the crossover follows the sub-block, not the
// segment and rate).
std::string dilated_policy() {
  const std::string rule = "- {dtype: bf16, head_dim: 128, causal: false, ";
  return "version: 2\n"
         "kind: ringbench-kernel-policy\n"
         "grid: {batch: 1, num_heads: 8}\n"
         "machine: {device: cuda, gpu: NVIDIA H100 80GB HBM3, gpu_arch: '9.0', cudnn: 9.14.0}\n"
         "rules:\n" +
         rule +
         "segment: 2048, rate: 1,\n   ranges: [{block_rows_min: 2048, block_rows_max: 65536, path: "
         "cudnn}]}\n" +
         rule +
         "segment: 8192, rate: 4,\n   ranges: [{block_rows_min: 8192, block_rows_max: 65536, path: "
         "flash}]}\n";
}

TEST_CASE("KernelPolicy::pick: dilated branches follow the measured kernel shape they resemble") {
  const auto use = rb::parse_kernel_policy_text(dilated_policy(), kFile);
  const rb::attn::KernelPolicy& p = *use->policy;
  const auto* cudnn = rb::attn::find_kernel_path("cudnn", rb::attn::Device::Cuda);
  const auto* flash = rb::attn::find_kernel_path("flash", rb::attn::Device::Cuda);
  const auto bf16 = [&](std::int64_t rows, int heads, std::int64_t segment, std::int64_t rate) {
    return pick(p, rows, heads, segment, rate, false, 128, DType::BF16);
  };
  // Measured shapes: sub-blocks of 2048 rows, 8 heads per call (w 2048 r 1) or 2 (w 8192 r 4).
  auto measured = p.measured(p.rules[0], p.rules[0].ranges[0]);
  CHECK((measured.first.sub_rows == 2048 && measured.first.heads_per_call == 8 &&
         measured.first.calls == 1));
  CHECK(measured.second.calls == 32);
  measured = p.measured(p.rules[1], p.rules[1].ranges[0]);
  CHECK((measured.first.sub_rows == 2048 && measured.first.heads_per_call == 2 &&
         measured.first.calls == 4));
  // The tuned branches themselves.
  CHECK(bf16(16384, 8, 2048, 1) == cudnn);
  CHECK(bf16(16384, 8, 8192, 4) == flash);
  // Untuned names: w 4096 r 2 at 16 heads is 2048-row sub-blocks, 8 heads per call: the
  // w 2048 r 1 measurement (0 steps away).
  CHECK(bf16(16384, 16, 4096, 2) == cudnn);
  // w 16384 r 8 at 8 heads: 2048-row sub-blocks, 1 head per call, 8 calls per segment: one
  // step from w 8192 r 4.
  CHECK(bf16(32768, 8, 16384, 8) == flash);
  // w 4096 r 1: 4096-row sub-blocks (rows and keys: two steps from w 2048 r 1).
  CHECK(bf16(16384, 8, 4096, 1) == cudnn);
  // w 2048 r 4 at 16 heads: 512-row sub-blocks, 4 per call: four steps from anything measured.
  CHECK(bf16(32768, 16, 2048, 4) == nullptr);
  // Exact attention has no rule here: the built-in rule.
  CHECK(bf16(16384, 8, 0, 1) == nullptr);
}

TEST_CASE("KernelPicker: a fixed row ignores the policy; auto follows it, then the built-in rule") {
  const auto use = rb::parse_kernel_policy_text(host_policy(), kFile);
  const auto* kokkos = host_row("kokkos");
  const auto* mat = host_row("materialized");
  const auto builtin = rb::attn::auto_kernel_path(rb::attn::Device::Host, DType::F32, 16, false,
                                                  rb::attn::KernelShape{});
  REQUIRE(builtin != nullptr);
  REQUIRE(builtin != mat);  // else "auto with policy" below could not tell the two apart
  rb::attn::Dims dims;
  dims.heads = 2;
  dims.head_dim = 16;
  dims.q_rows = dims.kv_rows = 300;  // the policy's materialized range
  const rb::attn::Pattern exact;

  const rb::attn::KernelPicker fixed(rb::attn::Device::Host, kokkos, use->policy);
  CHECK_FALSE(fixed.is_auto());
  CHECK(fixed.pick(DType::F32, dims, exact).row == kokkos);
  CHECK_FALSE(fixed.pick(DType::F32, dims, exact).from_policy);

  const rb::attn::KernelPicker with_policy(rb::attn::Device::Host, nullptr, use->policy);
  CHECK(with_policy.is_auto());
  CHECK(with_policy.pick(DType::F32, dims, exact).row == mat);
  CHECK(with_policy.pick(DType::F32, dims, exact).from_policy);
  dims.q_rows = dims.kv_rows =
      8;  // out of reach of every range: the built-in rule, not counted as the policy's
  CHECK(with_policy.pick(DType::F32, dims, exact).row == builtin);
  CHECK_FALSE(with_policy.pick(DType::F32, dims, exact).from_policy);

  const rb::attn::KernelPicker without(rb::attn::Device::Host, nullptr, nullptr);
  dims.q_rows = dims.kv_rows = 300;
  CHECK(without.pick(DType::F32, dims, exact).row == builtin);
  CHECK_FALSE(without.pick(DType::F32, dims, exact).from_policy);
}

// ---- does it apply here ----

TEST_CASE("applicability: same machine applies; device, GPU or cuDNN differing is a reason") {
  const auto host = rb::parse_kernel_policy_text(host_policy(), kFile);
  CHECK(rb::applicability(*host, {"host", "", "", ""}) == "");
  const std::string on_cuda = rb::applicability(*host, {"cuda", "NVIDIA H200", "9.14.0", ""});
  CHECK(on_cuda.find("tuned on the host path and this run is on the cuda path") !=
        std::string::npos);

  const auto cuda = rb::parse_kernel_policy_text(cuda_policy(), kFile);
  const std::string on_host = rb::applicability(*cuda, {"host", "", "", ""});
  CHECK(on_host.find("tuned on the cuda path and this run is on the host path") !=
        std::string::npos);
  const std::string gpu = rb::applicability(*cuda, {"cuda", "NVIDIA H100 80GB HBM3", "9.14.0", ""});
  CHECK(gpu.find("GPU 'NVIDIA H200'") != std::string::npos);
  CHECK(gpu.find("'NVIDIA H100 80GB HBM3'") != std::string::npos);
  const std::string cudnn = rb::applicability(*cuda, {"cuda", "NVIDIA H200", "9.10.2", ""});
  CHECK(cudnn.find("cuDNN 9.14.0") != std::string::npos);
  CHECK(cudnn.find("9.10.2") != std::string::npos);
  const std::string no_cudnn = rb::applicability(*cuda, {"cuda", "NVIDIA H200", "", ""});
  CHECK(no_cudnn.find("this run has (none)") != std::string::npos);
}

TEST_CASE(
    "portability: another GPU model of the same architecture applies, ported; another architecture "
    "does not") {
  const auto h200 =
      rb::parse_kernel_policy_text(cuda_policy(), kFile);  // no gpu_arch: known_gpu_arch
  CHECK(h200->machine.gpu_arch == "9.0");
  const rb::ThisMachine h100{"cuda", "NVIDIA H100 80GB HBM3", "9.14.0", "9.0"};
  CHECK(rb::applicability(*h200, h100) == "");
  CHECK(rb::ported_from(*h200, h100) == "NVIDIA H200");
  const rb::ThisMachine same{"cuda", "NVIDIA H200", "9.14.0", "9.0"};
  CHECK(rb::ported_from(*h200, same) == "");  // tuned here: nothing to port
  const rb::ThisMachine a100{"cuda", "NVIDIA A100-SXM4-80GB", "9.14.0", "8.0"};
  const std::string other = rb::applicability(*h200, a100);
  CHECK(other.find("it was tuned on GPU 'NVIDIA H200' (sm 9.0) and this rank has 'NVIDIA "
                   "A100-SXM4-80GB' (sm 8.0), "
                   "another architecture") == 0);
  CHECK(rb::ported_from(*h200, a100) == "");
  // The file's own gpu_arch wins over the name table; cuDNN must still match.
  const auto marked = rb::parse_kernel_policy_text(
      with(cuda_policy(), "gpu: NVIDIA H200,", "gpu: Some GPU, gpu_arch: '9.0',"), kFile);
  CHECK(marked->machine.gpu_arch == "9.0");
  CHECK(rb::applicability(*marked, h100) == "");
  CHECK(rb::ported_from(*marked, h100) == "Some GPU");
  CHECK(rb::applicability(*h200, {"cuda", "NVIDIA H100 80GB HBM3", "9.10.2", "9.0"})
            .find("tuned with cuDNN 9.14.0") != std::string::npos);
  // An unknown model without gpu_arch ports nowhere.
  const auto unknown = rb::parse_kernel_policy_text(
      with(cuda_policy(), "gpu: NVIDIA H200,", "gpu: Mystery X,"), kFile);
  CHECK(unknown->machine.gpu_arch == "");
  CHECK(rb::applicability(*unknown, h100).find("(sm unknown)") != std::string::npos);
}

TEST_CASE("known_gpu_arch: the models tuned so far, longest names first") {
  CHECK(rb::known_gpu_arch("NVIDIA H200") == "9.0");
  CHECK(rb::known_gpu_arch("NVIDIA H100 80GB HBM3") == "9.0");
  CHECK(rb::known_gpu_arch("NVIDIA GH200 480GB") == "9.0");
  CHECK(rb::known_gpu_arch("NVIDIA A100-SXM4-80GB") == "8.0");
  CHECK(rb::known_gpu_arch("NVIDIA L40S") == "8.9");
  CHECK(rb::known_gpu_arch("Tesla V100-SXM2-32GB") == "");
}

TEST_CASE("applicability: a policy naming a path this build lacks does not apply") {
  const auto cuda = rb::parse_kernel_policy_text(cuda_policy(), kFile);
  const rb::attn::KernelPath* flash = rb::attn::find_kernel_path("flash", rb::attn::Device::Cuda);
  REQUIRE(flash != nullptr);
  const std::string why = rb::applicability(*cuda, {"cuda", "NVIDIA H200", "9.14.0", ""});
  if (flash->built) {
    MESSAGE("this build has the CUDA path: the flash row is built, the policy applies");
    CHECK(why == "");
  } else {
    CHECK(why.find("names kernel path 'flash', which this build lacks") != std::string::npos);
    CHECK(why.find(flash->missing) != std::string::npos);
  }
}

// ---- `kernel_policy:` in a config ----

TEST_CASE("kernel_policy in a config: FILE relative to the config's folder, or {file, strict}") {
  const std::filesystem::path dir = scratch_dir();
  const std::string policy = (dir / "policies" / "host.yaml").string();
  write_file(policy, host_policy());
  const std::string config = (dir / "run.yaml").string();
  const std::string sweeps = "sweeps:\n  - type: memory\n";

  const rb::Config plain =
      rb::parse_config_text("kernel_policy: policies/host.yaml\n" + sweeps, config);
  REQUIRE(plain.kernel_policy != nullptr);
  CHECK(plain.kernel_policy->file == policy);
  CHECK(plain.kernel_policy->key == "kernel_policy");
  CHECK(plain.kernel_policy->where.file == config);
  CHECK(plain.kernel_policy->where.line == 1);
  CHECK_FALSE(plain.kernel_policy->strict);
  CHECK(plain.kernel_policy->policy->sha256 == rb::sha256_hex(host_policy()));

  const rb::Config strict = rb::parse_config_text(
      sweeps + "kernel_policy: {file: policies/host.yaml, strict: true}\n", config);
  REQUIRE(strict.kernel_policy != nullptr);
  CHECK(strict.kernel_policy->file == policy);
  CHECK(strict.kernel_policy->strict);
  CHECK(strict.kernel_policy->where.line == 3);

  // An absolute path is taken as it is.
  const rb::Config absolute =
      rb::parse_config_text("kernel_policy: " + policy + "\n" + sweeps, "/elsewhere/run.yaml");
  CHECK(absolute.kernel_policy->file == policy);
  std::filesystem::remove_all(dir);
}

TEST_CASE("kernel_policy in a config: a missing or bad policy file is a config error") {
  const std::filesystem::path dir = scratch_dir();
  const std::string config = (dir / "run.yaml").string();
  const std::string sweeps = "sweeps:\n  - type: memory\n";
  const ConfigError missing = expect_error(
      [&] { rb::parse_config_text(sweeps + "kernel_policy: policies/absent.yaml\n", config); });
  const std::string what = missing.what();
  CAPTURE(what);
  CHECK(missing.where().file == config);
  CHECK(missing.where().line == 3);
  CHECK(missing.key() == "kernel_policy");
  CHECK(what.find("cannot read the tuned policy file '" +
                  (dir / "policies" / "absent.yaml").string() + "'") != std::string::npos);

  const ConfigError empty = expect_error(
      [&] { rb::parse_config_text("kernel_policy: {file: '', strict: true}\n" + sweeps, config); });
  CHECK(empty.key() == "kernel_policy");
  const ConfigError typo = expect_error([&] {
    rb::parse_config_text("kernel_policy: {file: a.yaml, strikt: true}\n" + sweeps, config);
  });
  CHECK(typo.key() == "kernel_policy.strikt");
  CHECK(std::string(typo.what()).find("did you mean 'strict'?") != std::string::npos);

  // An error inside the policy names the policy file and its own key, not the config's.
  const std::string policy = (dir / "policies" / "bad.yaml").string();
  const std::string bad = with(host_policy(), "path: materialized", "path: materialised");
  write_file(policy, bad);
  const ConfigError inside = expect_error(
      [&] { rb::parse_config_text("kernel_policy: policies/bad.yaml\n" + sweeps, config); });
  CHECK(inside.where().file == policy);
  CHECK(inside.key() == "rules[0].ranges[1].path");
  CHECK(inside.where().line == line_of(bad, "path: materialised"));
  std::filesystem::remove_all(dir);
}

// #31: `kernel_policy:` may name any readable file; a refusal says what was expected and where,
// never a line of the file (an /etc/shadow line parses as a map with one unknown key).
TEST_CASE("kernel_policy naming a file that is no policy: refused without its content") {
  const std::filesystem::path dir = scratch_dir();
  const std::string config = (dir / "run.yaml").string();
  const std::string sweeps = "sweeps:\n  - type: memory\n";
  const std::string secret = "s3cretHashZZ";
  const std::vector<std::string> foreign = {
      "root:$6$" + secret + ":19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",  // a map
      "# " + secret + "\n" + secret + " is a scalar\n",                            // a scalar
      secret + ": 1\n" + secret + ": 2\n",                                         // duplicate keys
      "[" + secret + "\n",                                                         // not YAML
      "version: 2\nrules: []\n" + secret + ": x\n"};                               // no kind
  for (const std::string& text : foreign) {
    CAPTURE(text);
    write_file((dir / "not_policy").string(), text);
    const ConfigError e = expect_error(
        [&] { rb::parse_config_text(sweeps + "kernel_policy: not_policy\n", config); });
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find(secret) == std::string::npos);
    CHECK(e.where().file == config);
    CHECK(e.where().line == 3);
    CHECK(e.key() == "kernel_policy");
    CHECK(what.find("'" + (dir / "not_policy").string() + "' is not a tuned kernel policy") !=
          std::string::npos);
    CHECK(what.find("kind: ringbench-kernel-policy") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

// ---- the shipped policies on held-out shapes ----

// Issue #28 measured these LongNet branches on an H100 (S = 32K at ring size 1, 16 heads, d 128,
// bf16, fwd+bwd, median of 6): w 8192 r 2 cuDNN 356 vs flash 155 TFLOP/s, w 4096 r 2 cuDNN 228
// vs 121, w 8192 r 8 flash 70 vs cuDNN 31, w 2048 r 4 flash 55 vs cuDNN 22. The grid both shipped
// policies were tuned on (inputs/tuning.yaml, 2026-11-28: 8 heads, sub-blocks of 256 to 16K rows)
// has them only as kernel shapes, not as these LongNet branches: auto must still pick the
// measured winner, through the policy.
TEST_CASE("shipped policies: auto picks issue #28's measured winners on untuned LongNet shapes") {
  const auto* cudnn = rb::attn::find_kernel_path("cudnn", rb::attn::Device::Cuda);
  const auto* flash = rb::attn::find_kernel_path("flash", rb::attn::Device::Cuda);
  const bool built = cudnn->built && flash->built;
  struct Case {
    std::int64_t segment, rate;
    const rb::attn::KernelPath* winner;
  };
  const Case cases[] = {{8192, 2, cudnn}, {4096, 2, cudnn}, {8192, 8, flash}, {2048, 4, flash}};
  for (const char* file : {"tuned_h100.yaml", "tuned_h200.yaml"}) {
    CAPTURE(file);
    const std::string path = std::string(RINGBENCH_SOURCE_DIR) + "/inputs/" + file;
    const auto use = rb::parse_kernel_policy_text(rb::read_config_file(path), path);
    const rb::attn::KernelPicker picker(rb::attn::Device::Cuda, nullptr, use->policy);
    rb::attn::Dims dims;
    dims.heads = 16;
    dims.head_dim = 128;
    dims.q_rows = dims.kv_rows = 32768;
    for (const Case& c : cases) {
      CAPTURE(c.segment);
      CAPTURE(c.rate);
      rb::attn::Pattern pattern;
      pattern.segment = c.segment;
      pattern.rate = c.rate;
      const auto pick = picker.pick(DType::BF16, dims, pattern);
      // Without the CUDA rows built the built-in rule has nothing to pick: only the policy's
      // own picks can be checked.
      if (pick.from_policy || built) CHECK(pick.row == c.winner);
      // Both grids reach w 2048 r 4's 512-row sub-blocks (4 heads per call), so the policy, not
      // the built-in fallback, answers every case.
      CHECK(pick.from_policy);
    }
  }
}
