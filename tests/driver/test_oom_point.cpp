// The out-of-memory points of the compute, memory and collectives sweeps (sweeps/oom_point.hpp):
// what fits, how each kind of failure becomes a record, and the validation message. The sweeps
// themselves under a real memory limit are checked end to end by tests/hostile (oom).
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

#include <yaml-cpp/yaml.h>

#include "expect_error.hpp"
#include "config/config.hpp"
#include "sweeps/oom_point.hpp"
#include "sweeps/p2p_matrix.hpp"

namespace {
bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}
}  // namespace

TEST_CASE("oom: /proc/meminfo gives the node's memory and what is available") {
  const std::uint64_t total = rb::oom::meminfo_bytes("MemTotal");
  const std::uint64_t available = rb::oom::meminfo_bytes("MemAvailable");
  CHECK(total > 0);
  CHECK(available > 0);
  CHECK(available <= total);
  CHECK(rb::oom::meminfo_bytes("NoSuchField") == 0);
}

TEST_CASE("oom: fits divides what is there by the ranks on the node") {
  using rb::oom::fits;
  CHECK(fits(10, 2, 20));
  CHECK_FALSE(fits(11, 2, 20));
  CHECK(fits(20, 0, 20));         // no rank count: one rank
  CHECK(fits(1ull << 62, 8, 0));  // unknown memory: the allocator decides
}

TEST_CASE("oom: attempt turns each kind of failure into a record, success into none") {
  const std::uint64_t now = rb::oom::meminfo_bytes("MemAvailable");
  int runs = 0;
  const auto ok = rb::oom::attempt("t", 1024, 1, now, [&] { ++runs; });
  CHECK_FALSE(ok.ran_out());
  CHECK(runs == 1);

  const auto bad_alloc =
      rb::oom::attempt("memory triad", 4096, 1, now, [] { throw std::bad_alloc(); });
  CHECK(bad_alloc.ran_out());
  CHECK(bad_alloc.requested == 4096);
  CHECK(bad_alloc.free > 0);
  CHECK(contains(bad_alloc.message, "memory triad: out of memory allocating 4096 B"));

  const auto backend = rb::oom::attempt(
      "x", 0, 1, now, [] { throw rb::attn::OutOfMemory(123, 45, "kokkos allocate"); });
  CHECK(backend.requested == 123);
  CHECK(backend.free == 45);
  CHECK(contains(backend.message, "kokkos allocate: out of memory"));

  // More than the node has now: not tried (the OOM killer would end the rank instead).
  runs = 0;
  const auto huge = rb::oom::attempt("gemm", 600, 2, 1000, [&] { ++runs; });
  CHECK(runs == 0);
  CHECK(huge.ran_out());
  CHECK(huge.requested == 600);
  CHECK(huge.free == 1000);
  CHECK(contains(huge.message, "not tried: the 2 ranks on this node need 600 B each"));
  // More than the address space allows: the untouched reservation fails first.
  const auto reserve = rb::oom::attempt("gemm", std::numeric_limits<std::uint64_t>::max() / 4, 1, 0,
                                        [&] { ++runs; });
  CHECK(runs == 0);
  CHECK(contains(reserve.message, "the allocation failed"));

  // Other errors are not out-of-memory: they pass through.
  CHECK_THROWS_AS(rb::oom::attempt("x", 0, 1, now, [] { throw std::runtime_error("other"); }),
                  std::runtime_error);
}

TEST_CASE("oom: validation names the file, line and key of a size beyond the node") {
  const rb::cfg::Node n(YAML::Load("type: memory\nbytes: 1TiB\n"), "job.yaml", "sweeps[0]");
  CHECK_NOTHROW(
      rb::oom::check_host_memory_fits(n, "bytes", 3ull << 40, 1, 0, "memory"));  // unknown
  CHECK_NOTHROW(rb::oom::check_host_memory_fits(n, "bytes", 1 << 20, 4, 1ull << 30, "memory"));
  const rb::cfg::ConfigError e = rb::test::expect_error([&] {
    rb::oom::check_host_memory_fits(n, "bytes", 3ull << 40, 2, 64ull << 30, "the memory sweep");
  });
  const std::string what = e.what();
  CAPTURE(what);
  CHECK(what.rfind("job.yaml:2:8: key 'sweeps[0].bytes': the memory sweep needs 3 TiB", 0) == 0);
  CHECK(contains(what, "2 rank(s) on this node"));
  CHECK(contains(what, "64 GiB of physical memory"));
}

// #31: p2p_matrix's host engine holds two buffers of bandwidth_bytes (4 GiB a rank at the
// largest legal value): refused at that key like the other sweeps' sizes.
TEST_CASE("oom: p2p_matrix's message buffers are checked against the node's memory") {
  const rb::Config cfg = rb::parse_config_text(
      "sweeps:\n  - type: p2p_matrix\n    bandwidth_bytes: 2147483647\n", "p2p.yaml");
  rb::ParseContext pctx;
  pctx.world_size = 2;
  pctx.node_count = 1;
  pctx.backend = rb::Backend::Host;
  const auto sweep = rb::parse_p2p_matrix(cfg.sweeps.at(0), pctx);
  const auto need = sweep->host_memory_need();
  REQUIRE(need.has_value());
  CHECK(need->key == "bandwidth_bytes");
  CHECK(need->bytes == 2ull * 2147483647ull);
  const rb::cfg::ConfigError e = rb::test::expect_error([&] {
    rb::oom::check_host_memory_fits(cfg.sweeps.at(0).node, need->key, need->bytes, 2, 6ull << 30,
                                    need->what);
  });
  const std::string what = e.what();
  CAPTURE(what);
  CHECK(what.rfind("p2p.yaml:3:22: key 'sweeps[0].bandwidth_bytes': the p2p_matrix sweep", 0) == 0);
  pctx.backend = rb::Backend::Cuda;  // the NCCL engine's buffers are on the GPU
  CHECK_FALSE(rb::parse_p2p_matrix(cfg.sweeps.at(0), pctx)->host_memory_need().has_value());
}
