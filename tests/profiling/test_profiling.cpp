// Profiling sweeps, host path: every MPI collective's data, the busbw factors, the buffer
// sizes nccl-tests uses, rank groups (also with pretend nodes), the alpha-beta fit and the
// collectives parser's rejections. Runs at 1, 2, 3 and 4 ranks (tests/profiling.cmake).
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "runtime/mpi.hpp"
#include "dtype.hpp"
#include "profiling/collective_table.hpp"
#include "sweeps/collectives.hpp"
#include "profiling/cost_model.hpp"
#include "profiling/groups.hpp"
#include "profiling/timing.hpp"
#include "test_support.hpp"

namespace {

using rb::coll::Op;
using rb::prof::DType;

const std::vector<Op> kAllOps = {Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::AllToAll,
                                 Op::Broadcast, Op::Reduce,    Op::SendRecv};
const std::vector<DType> kAllTypes = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32};

// Runs one collective the way the sweep does (fill, call, check) and returns this rank's
// wrong-element count.
std::size_t run_and_check(Op op, DType t, bool in_place, std::size_t requested, int root,
                          bool corrupt = false) {
  const int n = rb::test::world(), rank = rb::test::rank();
  rb::prof::HostBuffer send(requested + 64), recv(requested + 64);
  rb::coll::Call c = rb::coll::call_for(op, t, in_place, requested, rank, n, root);
  c.send = send.get();
  c.recv = recv.get();
  const rb::coll::Regions r = rb::coll::regions(c, rb::coll::Transport::Mpi);
  std::memset(r.zero, 0, r.zero_bytes);
  for (std::size_t i = 0; i < r.input_count; ++i)
    rb::prof::store(r.input, i, t, rb::prof::input_value(rank, i));
  rb::coll::collective(op).mpi(c, MPI_COMM_WORLD);
  if (corrupt && r.output_count > 0)
    rb::prof::store(r.output, r.output_count - 1, t,
                    rb::prof::load(r.output, r.output_count - 1, t) + 1);
  return rb::coll::count_mismatches_host(r, t);
}

}  // namespace

TEST_CASE("busbw factors follow nccl-tests for every operation and group size") {
  for (int n = 1; n <= 8; ++n) {
    const double dn = n;
    CHECK(rb::coll::busbw_factor(Op::AllReduce, n) == doctest::Approx(2.0 * (dn - 1) / dn));
    CHECK(rb::coll::busbw_factor(Op::AllGather, n) == doctest::Approx((dn - 1) / dn));
    CHECK(rb::coll::busbw_factor(Op::ReduceScatter, n) == doctest::Approx((dn - 1) / dn));
    CHECK(rb::coll::busbw_factor(Op::AllToAll, n) == doctest::Approx((dn - 1) / dn));
    CHECK(rb::coll::busbw_factor(Op::Broadcast, n) == 1.0);
    CHECK(rb::coll::busbw_factor(Op::Reduce, n) == 1.0);
    CHECK(rb::coll::busbw_factor(Op::SendRecv, n) == 1.0);
  }
  // Spot values as nccl-tests prints them for 4 and 8 GPUs.
  CHECK(rb::coll::busbw_factor(Op::AllReduce, 4) == doctest::Approx(1.5));
  CHECK(rb::coll::busbw_factor(Op::AllReduce, 8) == doctest::Approx(1.75));
  CHECK(rb::coll::busbw_factor(Op::AllGather, 4) == doctest::Approx(0.75));
  CHECK(rb::coll::busbw(Op::AllReduce, 4, 1000, 1e-6) == doctest::Approx(1.5e9));
  CHECK(rb::coll::algbw(1000, 1e-6) == doctest::Approx(1e9));
}

TEST_CASE("the collective table has one row per operation, found by name and by op") {
  const auto& rows = rb::coll::collectives();
  REQUIRE(rows.size() == kAllOps.size());
  std::vector<std::string> names;
  for (const auto& row : rows) {
    CAPTURE(row.name);
    CHECK(&rb::coll::collective(row.op) == &row);
    CHECK(rb::coll::op_from_name(row.name) == row.op);
    CHECK(std::string(rb::coll::op_name(row.op)) == row.name);
    CHECK(std::find(names.begin(), names.end(), row.name) == names.end());
    names.push_back(row.name);
    CHECK(static_cast<bool>(row.mpi));
    CHECK(static_cast<bool>(row.nccl));
  }
  CHECK(rb::coll::op_names() == names);
}

TEST_CASE("message sizes are counted as nccl-tests counts them") {
  // 1 MiB of float32 over 4 ranks.
  const std::size_t S = 1 << 20;
  auto ar = rb::coll::sizes_for(Op::AllReduce, S, 4, 4);
  CHECK(ar.count == S / 4);
  CHECK(ar.bytes == S);
  auto ag = rb::coll::sizes_for(Op::AllGather, S, 4, 4);
  CHECK(ag.count == S / 16);  // per rank
  CHECK(ag.send_bytes == S / 4);
  CHECK(ag.recv_bytes == S);  // the gathered total is the reported size
  CHECK(ag.bytes == S);
  CHECK(ag.send_inplace_offset == S / 4);
  auto rs = rb::coll::sizes_for(Op::ReduceScatter, S, 4, 4);
  CHECK(rs.count == S / 16);
  CHECK(rs.send_bytes == S);
  CHECK(rs.recv_bytes == S / 4);
  CHECK(rs.bytes == S);
  CHECK(rs.recv_inplace_offset == S / 4);
  auto a2a = rb::coll::sizes_for(Op::AllToAll, S, 4, 4);
  CHECK(a2a.count == S / 16);  // per peer
  CHECK(a2a.bytes == S);
  // Not divisible: counts truncate the way nccl-tests' (count/nranks)*nranks does.
  auto odd = rb::coll::sizes_for(Op::AllGather, 100, 4, 3);
  CHECK(odd.count == 8);
  CHECK(odd.bytes == 96);
  CHECK(rb::coll::op_from_name("reduce_scatter") == Op::ReduceScatter);
  CHECK_THROWS_AS(rb::coll::op_from_name("allreduce"), std::invalid_argument);
}

TEST_CASE("16-bit float conversions round to nearest even and round-trip small integers") {
  for (int i = -2048; i <= 2048; ++i)
    CHECK(rb::attn::half_to_float(rb::attn::float_to_half(static_cast<float>(i))) ==
          static_cast<float>(i));
  for (int i = -256; i <= 256; ++i)
    CHECK(rb::attn::bf16_to_float(rb::attn::float_to_bf16(static_cast<float>(i))) ==
          static_cast<float>(i));
  CHECK(rb::attn::half_to_float(rb::attn::float_to_half(2049.0f)) == 2048.0f);  // tie to even
  CHECK(rb::attn::half_to_float(rb::attn::float_to_half(0.1f)) ==
        doctest::Approx(0.1f).epsilon(1e-3));
  CHECK(rb::attn::bf16_to_float(rb::attn::float_to_bf16(257.0f)) == 256.0f);
  CHECK(std::isinf(rb::attn::half_to_float(rb::attn::float_to_half(1e6f))));
}

TEST_CASE("every MPI collective delivers the expected data (all dtypes, in and out of place)") {
  const int n = rb::test::world();
  for (Op op : kAllOps) {
    for (DType t : kAllTypes) {
      for (bool ip : {false, true}) {
        if (ip && !rb::coll::supports_in_place(op)) continue;
        // Sizes that divide and that do not divide the group, and one large enough for
        // MPI's segmented algorithms.
        for (std::size_t bytes : {std::size_t(8), std::size_t(1000), std::size_t(96 * 1024 + 24)}) {
          const int root = (n - 1) % n;
          CAPTURE(rb::coll::op_name(op));
          CAPTURE(rb::prof::dtype_name(t));
          CAPTURE(ip);
          CAPTURE(bytes);
          const std::size_t wrong = run_and_check(op, t, ip, bytes, root);
          CHECK(wrong == 0);
        }
      }
    }
  }
}

TEST_CASE("the data check catches a wrong element") {
  // all_reduce checks on every rank, so every rank must see its corrupted element.
  CHECK(run_and_check(Op::AllReduce, DType::F32, false, 4096, 0, true) == 1);
  CHECK(run_and_check(Op::AllGather, DType::BF16, true, 4096, 0, true) == 1);
}

TEST_CASE("reductions of many ranks' 16-bit data tolerate only rounding") {
  // Values beyond the exact-integer range get n roundings of slack, not more.
  CHECK(rb::prof::tolerance(DType::BF16, 100.0, 4) == 0.0);
  CHECK(rb::prof::tolerance(DType::BF16, 512.0, 4) == doctest::Approx(8.0));
  CHECK(rb::prof::tolerance(DType::I32, 1e9, 64) == 0.0);
  CHECK_FALSE(rb::prof::matches(DType::F32, 3.0, 4.0, 2));
  CHECK_FALSE(rb::prof::matches(DType::F32, std::nan(""), 4.0, 2));
}

TEST_CASE("groups: world, intra_node, inter_node and block sizes") {
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  const int n = rb::test::world();
  std::vector<std::string> kinds = {"world", "intra_node", "inter_node"};
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) kinds.push_back(std::to_string(k));
  for (const auto& text : kinds) {
    CAPTURE(text);
    rb::groups::Spec spec;
    REQUIRE(rb::groups::parse_spec(text, &spec).empty());
    CHECK(spec.label() == text);
    REQUIRE(rb::groups::validate(spec, n).empty());
    rb::groups::Group g = rb::groups::make_group(spec, MPI_COMM_WORLD, layout);
    // Every member's node index and local rank, gathered in group order.
    std::vector<int> mine = {layout.node_index, layout.local_rank, layout.rank, g.id};
    std::vector<int> all(4 * static_cast<std::size_t>(g.size));
    MPI_Allgather(mine.data(), 4, MPI_INT, all.data(), 4, MPI_INT, g.get());
    for (int m = 0; m < g.size; ++m) {
      const int node = all[4 * m], local = all[4 * m + 1], rank = all[4 * m + 2],
                id = all[4 * m + 3];
      CHECK(id == g.id);  // one group id per group
      if (spec.kind == rb::groups::Kind::IntraNode) CHECK(node == layout.node_index);
      if (spec.kind == rb::groups::Kind::InterNode) {
        CHECK(local == layout.local_rank);
        CHECK(node == m);  // ordered by node
      }
      if (spec.kind == rb::groups::Kind::Blocks) CHECK(rank == g.id * spec.block + m);
      if (spec.kind == rb::groups::Kind::World) CHECK(rank == m);
    }
    if (spec.kind == rb::groups::Kind::World) CHECK(g.size == n);
    if (spec.kind == rb::groups::Kind::IntraNode) CHECK(g.size == layout.local_size);
    if (spec.kind == rb::groups::Kind::Blocks) CHECK(g.size == spec.block);
    // Groups partition the world: group sizes over distinct ids sum to n.
    int leader = g.rank == 0 ? g.size : 0, total = 0;
    MPI_Allreduce(&leader, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == n);
  }
}

TEST_CASE("groups under simulated nodes (RINGBENCH_RANKS_PER_NODE, RINGBENCH_PLACEMENT)") {
  const rb::SimulatedNodes sim = rb::simulated_nodes_from_environment();
  if (!sim.active()) return;  // covered by the registrations that set it
  const int per_node = sim.ranks_per_node;
  const int n = rb::test::world(), rank = rb::test::rank();
  const int nodes = (n + per_node - 1) / per_node;
  const bool cyclic = sim.placement == rb::Placement::Cyclic;
  // Block: ranks 0..k-1 on node 0; cyclic: rank r on node r % nodes.
  auto node_of = [&](int r) { return cyclic ? r % nodes : r / per_node; };
  auto local_of = [&](int r) { return cyclic ? r / nodes : r % per_node; };
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  CHECK(layout.node_index == node_of(rank));
  rb::groups::Spec intra, inter;
  REQUIRE(rb::groups::parse_spec("intra_node", &intra).empty());
  REQUIRE(rb::groups::parse_spec("inter_node", &inter).empty());
  auto gi = rb::groups::make_group(intra, MPI_COMM_WORLD, layout);
  auto ge = rb::groups::make_group(inter, MPI_COMM_WORLD, layout);
  int on_my_node = 0, with_my_local_rank = 0;
  for (int r = 0; r < n; ++r) {
    if (node_of(r) == node_of(rank)) ++on_my_node;
    if (local_of(r) == local_of(rank)) ++with_my_local_rank;
  }
  CHECK(gi.id == node_of(rank));
  CHECK(gi.size == on_my_node);
  CHECK(gi.rank == local_of(rank));
  CHECK(ge.id == local_of(rank));
  CHECK(ge.size == with_my_local_rank);
}

TEST_CASE("group specs are validated against the world size") {
  rb::groups::Spec s;
  CHECK(rb::groups::parse_spec("4", &s).empty());
  CHECK(s.kind == rb::groups::Kind::Blocks);
  CHECK(rb::groups::validate(s, 8).empty());
  CHECK(rb::groups::validate(s, 6).find("does not divide") != std::string::npos);
  CHECK(rb::groups::validate(s, 2).find("larger than") != std::string::npos);
  CHECK(rb::groups::parse_spec("0", &s).find("at least 1") != std::string::npos);
  CHECK(rb::groups::parse_spec("intra-node", &s).find("unknown group") != std::string::npos);
  CHECK(rb::groups::parse_spec("-2", &s).find("unknown group") != std::string::npos);
}

TEST_CASE("the alpha-beta fit recovers known alpha and beta from noisy timings") {
  struct Case {
    double alpha, beta;
  };
  std::mt19937 rng(12345);
  std::uniform_real_distribution<double> noise(-0.03, 0.03);
  for (const Case c : {Case{5e-6, 20e9}, Case{25e-6, 1.5e9}, Case{1e-3, 400e9}}) {
    std::vector<rb::cost::Point> pts;
    for (double m = 8; m <= 1 << 30; m *= 2)
      pts.push_back({m, (c.alpha + m / c.beta) * (1.0 + noise(rng))});
    const rb::cost::Fit f = rb::cost::fit_alpha_beta(pts);
    REQUIRE(f.ok);
    CHECK(f.points == pts.size());
    CHECK(f.alpha_s == doctest::Approx(c.alpha).epsilon(0.03));
    CHECK(f.beta_Bps == doctest::Approx(c.beta).epsilon(0.03));
    CHECK(f.rel_rms_error < 0.03);
    CHECK(f.rel_rms_error > 0.005);  // the noise is visible in the error
    CHECK(f.predict(1e6) == doctest::Approx(c.alpha + 1e6 / c.beta).epsilon(0.03));
  }
  // Exact data: exact fit, zero error.
  std::vector<rb::cost::Point> exact;
  for (double m = 1024; m <= 1 << 24; m *= 4) exact.push_back({m, 2e-6 + m / 10e9});
  const auto fe = rb::cost::fit_alpha_beta(exact);
  CHECK(fe.alpha_s == doctest::Approx(2e-6).epsilon(1e-6));
  CHECK(fe.beta_Bps == doctest::Approx(10e9).epsilon(1e-6));
  CHECK(fe.rel_rms_error < 1e-9);
  // Flat timings: a pure latency, infinite bandwidth.
  const auto flat = rb::cost::fit_alpha_beta({{8, 1e-5}, {64, 1e-5}, {512, 1e-5}});
  CHECK(flat.alpha_s == doctest::Approx(1e-5));
  CHECK(std::isinf(flat.beta_Bps));
  // Too few points.
  CHECK_FALSE(rb::cost::fit_alpha_beta({{8, 1e-5}}).ok);
}

TEST_CASE("piecewise-linear interpolation through the raw points") {
  std::vector<rb::cost::Point> pts = {{1000, 3e-6}, {10, 1e-6}, {100, 2e-6}};  // unsorted
  CHECK(rb::cost::interpolate(pts, 10) == doctest::Approx(1e-6));
  CHECK(rb::cost::interpolate(pts, 55) == doctest::Approx(1.5e-6));
  CHECK(rb::cost::interpolate(pts, 550) == doctest::Approx(2.5e-6));
  CHECK(rb::cost::interpolate(pts, 1) == doctest::Approx(1e-6));     // clamps below
  CHECK(rb::cost::interpolate(pts, 1900) == doctest::Approx(4e-6));  // extends the last segment
}

namespace {
// Parses `body` as the only sweep of a config and runs the collectives parser on it.
std::string collectives_error(const std::string& body, int world = 4) {
  const std::string text = "sweeps:\n  - type: collectives\n" + body;
  try {
    rb::Config cfg = rb::parse_config_text(text, "test.yaml");
    rb::ParseContext ctx;
    ctx.world_size = world;
    ctx.backend = rb::Backend::Host;
    auto sweep = rb::parse_collectives(cfg.sweeps.at(0), ctx);
    REQUIRE(sweep);
    CHECK(!sweep->plan().empty());
    return "";
  } catch (const rb::cfg::ConfigError& e) {
    return e.what();
  }
}
}  // namespace

TEST_CASE("collectives parser: defaults, plan and rejections") {
  CHECK(collectives_error("") == "");
  CHECK(collectives_error(
            "    operations: [all_reduce, sendrecv]\n    groups: [world, 2, intra_node]\n"
            "    dtypes: [bfloat16, float32]\n    in_place: false\n") == "");
  CHECK(collectives_error("    min_bytes: 1MiB\n    max_bytes: 1KiB\n")
            .find("larger than max_bytes") != std::string::npos);
  CHECK(collectives_error("    factor: 1\n").find("factor") != std::string::npos);
  const std::string unknown = collectives_error("    operations: [allreduce]\n");
  CHECK(unknown.find("all_reduce") != std::string::npos);  // the suggestion
  CHECK(collectives_error("    groups: [3]\n").find("does not divide") != std::string::npos);
  CHECK(collectives_error("    groups: [8]\n").find("larger than") != std::string::npos);
  CHECK(collectives_error("    groups: [nodes]\n").find("unknown group") != std::string::npos);
  // One dtype vocabulary: the short names, and the long ones for them.
  CHECK(collectives_error("    dtypes: [fp32, bfloat16, int32]\n") == "");
  CHECK(
      collectives_error("    dtypes: [fp33]\n")
          .find("expected one of fp32|fp64|fp16|bf16|int32 (or float32|float64|float16|bfloat16), "
                "got 'fp33'") != std::string::npos);
  CHECK(collectives_error("    iteratons: 3\n").find("iterations") != std::string::npos);
  CHECK(collectives_error("    max_bytes: 16GiB\n    dtypes: [bfloat16]\n").find("int counts") !=
        std::string::npos);

  // The plan: sizes 8..64 by 2 = 4 sizes; all_to_all and sendrecv have no in-place points.
  rb::Config cfg = rb::parse_config_text(
      "sweeps:\n  - type: collectives\n    min_bytes: 8\n    max_bytes: 64\n"
      "    operations: [all_reduce, all_to_all]\n    groups: [world, 2]\n",
      "test.yaml");
  rb::ParseContext ctx;
  ctx.world_size = 4;
  auto sweep = rb::parse_collectives(cfg.sweeps.at(0), ctx);
  CHECK(sweep->plan().size() == 2u * 4u * 2u + 2u * 4u * 1u);
}
