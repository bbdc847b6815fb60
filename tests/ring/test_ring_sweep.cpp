// The ring_attention sweep's config parser (one rank, pretending a world of 4): points,
// defaults, and rejected configurations whose messages carry the numbers and the key.
#include <doctest/doctest.h>

#include <string>

#include "config/node.hpp"
#include "sweeps/ring_attention.hpp"

namespace {

rb::SweepSpec spec_of(const std::string& yaml) {
  rb::SweepSpec s;
  s.type = "ring_attention";
  s.name = "ra";
  s.node = rb::cfg::Node(YAML::Load(yaml), "test.yaml", "sweeps[0]");
  return s;
}

rb::ParseContext world4() {
  rb::ParseContext c;
  c.world_size = 4;
  c.backend = rb::Backend::Host;
  return c;
}

// Parses and returns the error (empty if accepted); checks the failing key too.
std::string rejection(const std::string& yaml, const std::string& key) {
  try {
    rb::parse_ring_attention(spec_of(yaml), world4());
  } catch (const rb::cfg::ConfigError& e) {
    CHECK(e.key() == "sweeps[0]." + key);
    CHECK(std::string(e.what()).find("test.yaml:") == 0);  // file:line:col first
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("ring_attention config: points are seq_lengths x ring_sizes x layouts x dtypes") {
  auto s = rb::parse_ring_attention(
      spec_of("{type: ring_attention, seq_lengths: [64, 128], ring_sizes: [2, 4], "
              "layout: [zigzag, striped], dtype: [fp32, bf16], causal: true, num_heads: 2, head_dim: 8}"),
      world4());
  const auto plan = s->plan();
  REQUIRE(plan.size() == 16);
  CHECK(plan[0].find("S=64 R=2 (2 rings) causal zigzag fp32") == 0);
  CHECK(plan[15].find("S=128 R=4 (1 ring) causal striped bf16") == 0);
  CHECK(s->estimated_output_bytes() > 0);
  // defaults: ring size = world, layout zigzag when causal, contiguous otherwise
  auto d = rb::parse_ring_attention(spec_of("{seq_lengths: 64}"), world4());
  REQUIRE(d->plan().size() == 1);
  CHECK(d->plan()[0].find("S=64 R=4 (1 ring) contiguous fp32 b=1 h=8 d=64 fwd+bwd") == 0);
  // embed_dim gives head_dim
  auto e = rb::parse_ring_attention(spec_of("{seq_lengths: 64, embed_dim: 96, num_heads: 3}"), world4());
  CHECK(e->plan()[0].find("h=3 d=32") != std::string::npos);
}

TEST_CASE("ring_attention config: ring_sizes: powers_of_two follows the world size") {
  auto sizes_for = [](int world) {
    rb::ParseContext c = world4();
    c.world_size = world;
    auto s = rb::parse_ring_attention(spec_of("{seq_lengths: [96], ring_sizes: powers_of_two}"), c);
    std::string rs;
    for (const auto& line : s->plan()) rs += line.substr(line.find(" R=") + 3, line.find(' ', line.find(" R=") + 1) - line.find(" R=") - 3) + ",";
    return rs;
  };
  CHECK(sizes_for(1) == "1,");
  CHECK(sizes_for(4) == "1,2,4,");
  CHECK(sizes_for(6) == "1,2,6,");  // the powers of two dividing 6, then the whole world
  CHECK(rejection("{seq_lengths: [64], ring_sizes: power_of_two}", "ring_sizes") != "");
}

TEST_CASE("ring_attention config: kernel cudnn needs a build with cuDNN") {
  rb::ParseContext c = world4();
  c.backend = rb::Backend::Cuda;
  std::string err;
  try {
    rb::parse_ring_attention(spec_of("{seq_lengths: [64], kernel: cudnn}"), c);
  } catch (const rb::cfg::ConfigError& e) {
    CHECK(e.key() == "sweeps[0].kernel");
    err = e.message();
  }
#ifdef RINGBENCH_HAVE_CUDNN
  CHECK(err.empty());
#else
  CHECK(err.find("kernel 'cudnn' needs a build with cuDNN") == 0);
#endif
}

TEST_CASE("ring_attention config: impossible combinations are rejected with the numbers") {
  CHECK(rejection("{seq_lengths: [64]}", "").empty());
  CHECK(rejection("{seq_lengths: [64], ring_sizes: [3]}", "ring_sizes") ==
        "ring size 3 does not divide the world size 4 (4 % 3 = 1): the world splits into world / ring size concurrent rings");
  CHECK(rejection("{seq_lengths: [64], ring_sizes: [8]}", "ring_sizes").find("ring size 8 does not divide the world size 4") == 0);
  CHECK(rejection("{seq_lengths: [100], causal: true}", "seq_lengths") ==
        "point S=100, ring size 4, layout zigzag: zigzag layout needs the sequence length divisible by 2 x ring size: 100 % 8 = 4");
  CHECK(rejection("{seq_lengths: [66], ring_sizes: [4]}", "seq_lengths") ==
        "point S=66, ring size 4, layout contiguous: sequence length must be divisible by the ring size: 66 % 4 = 2");
  CHECK(rejection("{seq_lengths: [64], segment_lengths: [16, 32], dilation_rates: [1]}", "dilation_rates") ==
        "segment_lengths has 2 entries and dilation_rates 1: one dilation rate per segment length");
  CHECK(rejection("{seq_lengths: [64], segment_lengths: [16], dilation_rates: [32]}", "dilation_rates") ==
        "dilation rate 32 (entry 0) is larger than its segment length 16");
  CHECK(rejection("{seq_lengths: [64], segment_lengths: [16, 12], dilation_rates: [1, 8]}", "segment_lengths") ==
        "segment length 12 (entry 1) is not divisible by its dilation rate 8: 12 % 8 = 4");
  CHECK(rejection("{seq_lengths: [64, 96], segment_lengths: [64], dilation_rates: [2]}", "seq_lengths") ==
        "point S=96, ring size 4, layout contiguous: branch 0: sequence length must be divisible by the segment length: 96 % 64 = 32");
  CHECK(rejection("{seq_lengths: [64], segment_lengths: [128], dilation_rates: [2]}", "seq_lengths") ==
        "point S=64, ring size 4, layout contiguous: branch 0: segment length 128 is longer than the sequence length 64");
  CHECK(rejection("{seq_lengths: [64], embed_dim: 100, num_heads: 8}", "embed_dim") ==
        "embed_dim 100 is not divisible by num_heads 8 (100 % 8 = 4)");
  CHECK(rejection("{seq_lengths: [64], embed_dim: 128, num_heads: 4, head_dim: 16}", "head_dim") ==
        "head_dim 16 contradicts embed_dim / num_heads = 128 / 4 = 32");
  CHECK(rejection("{seq_lengths: [64], kernel: flash}", "kernel").find("kernel 'flash' is a GPU kernel") == 0);
  CHECK(rejection("{seq_lengths: [64], head_dim: 512}", "head_dim") ==
        "head_dim 512 exceeds the host kernels' maximum 256");
  CHECK(rejection("{num_heads: 2}", "seq_lengths").find("required") == 0);
  CHECK_FALSE(rejection("{seq_lengths: [64], layout: zigzg}", "layout").empty());
  CHECK_FALSE(rejection("{seq_lengths: [64], validate: {dumb: true}}", "validate.dumb").empty());
}
