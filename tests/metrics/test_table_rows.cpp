// A points table's rows (src/metrics/table_rows.cpp): which ranks a sampled table keeps per
// point (pick_rows, one rank), and the sampled layout itself at 1 to 4 ranks: every rank a row
// up to the sample's size, above it the sample, row_rank and over_ranks/.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "metrics/h5.hpp"
#include "metrics/table.hpp"
#include "test_support.hpp"

namespace {

using rb::h5::pick_rows;
using rb::test::rank;
using rb::test::world;
using Rows = std::vector<std::int64_t>;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TEST_CASE("pick_rows: the slowest first, evenly spaced quantiles, the fastest last") {
  // Ten ranks whose value is their number: quantiles of 4 rows are ranks 9, 6, 3, 0.
  std::vector<double> order;
  for (int r = 0; r < 10; ++r) order.push_back(r);
  CHECK(pick_rows(order, 4) == Rows{9, 6, 3, 0});
  CHECK(pick_rows(order, 1) == Rows{9});
  CHECK(pick_rows(order, 10) == Rows{9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  // Ties keep rank order; ranks without a value come never, their rows stay empty (-1).
  CHECK(pick_rows({1, kNaN, 1, kNaN, 5}, 4) == Rows{4, 0, 2, -1});
  // Nobody has a value: rank numbers spread over the world.
  CHECK(pick_rows(std::vector<double>(9, kNaN), 3) == Rows{0, 4, 8});
  CHECK(pick_rows(std::vector<double>(2, kNaN), 3) == Rows{0, 1, -1});
  // Every row distinct however close the spacing.
  std::vector<double> many(17);
  for (int r = 0; r < 17; ++r) many[static_cast<std::size_t>(r)] = -r;
  const Rows picked = pick_rows(many, 16);
  for (std::size_t k = 1; k < picked.size(); ++k) CHECK(picked[k] > picked[k - 1]);
}

TEST_CASE(
    "points table: above sample_ranks every point keeps that many ranks, row_rank and "
    "over_ranks say which and what the others measured") {
  const std::string path = rb::test::test_path("metrics", "sampled_table");
  const std::size_t rows = 2, W = static_cast<std::size_t>(world());
  {
    rb::h5::File f = rb::h5::File::create(path, MPI_COMM_WORLD, false);
    rb::h5::Group sweep = f.root().group("sweep");
    rb::h5::PointsTable t(2);
    t.key("size", std::vector<std::int64_t>{8, 16}, {"1", "size"});
    t.metric("time_s", {"s", "time"});
    t.metric("iteration_time_s", {"s", "per iteration"}, {3}, {"iteration"});
    t.int_metric("group_size", {"1", "group"});
    t.text_metric("status", {"1", "outcome"});
    t.sample_ranks(rows);
    CHECK(t.rows_at(1) == 1);
    CHECK(t.rows_at(2) == 2);
    CHECK(t.rows_at(4) == 2);
    for (std::size_t p = 0; p < 2; ++p) {
      const double mine = 10.0 * rank() + static_cast<double>(p);
      t.set("time_s", p, mine);
      t.set("iteration_time_s", p, std::vector<double>{mine, mine, mine});
      t.set_int("group_size", p, rank() == 0 ? -1 : 4);  // rank 0's value is missing
      t.set_text("status", p, "ok" + std::to_string(rank()));
      t.order(p, p == 0 ? mine : -mine);  // point 1: the lowest rank is the slowest
    }
    t.write(sweep);
    f.close();
  }
  if (rank() != 0) return;
  std::vector<std::uint64_t> dims;
  const auto time = rb::h5::read_doubles(path, "/sweep/time_s", &dims);
  if (W <= rows) {  // every rank a row, as without sampling
    CHECK(dims == std::vector<std::uint64_t>{W, 2});
    CHECK(time[0] == 0.0);
    CHECK(rb::h5::read_doubles(path, "/sweep/rank").size() == W);
    return;
  }
  REQUIRE(dims == std::vector<std::uint64_t>{rows, 2});
  const auto row_rank = rb::h5::read_ints(path, "/sweep/row_rank", &dims);
  REQUIRE(dims == std::vector<std::uint64_t>{rows, 2});
  const std::int64_t last = static_cast<std::int64_t>(W) - 1;
  CHECK(row_rank == Rows{last, 0, 0, last});  // [row, point]: the slowest, then the fastest
  CHECK(rb::h5::read_string_attr(path, "/sweep/row_rank", "role") == "key");
  CHECK(time == std::vector<double>{10.0 * last, 1.0, 0.0, 10.0 * last + 1});
  const auto it = rb::h5::read_doubles(path, "/sweep/iteration_time_s", &dims);
  CHECK(dims == std::vector<std::uint64_t>{rows, 2, 3});
  CHECK(it[3 * 1 + 2] == 1.0);
  const auto status = rb::h5::read_strings(path, "/sweep/status");
  CHECK(status == std::vector<std::string>{"ok" + std::to_string(last), "ok0", "ok0",
                                           "ok" + std::to_string(last)});
  // Over every rank: min, mean, max, sum; integer -1 is no value.
  const auto stats = rb::h5::read_doubles(path, "/sweep/over_ranks/time_s", &dims);
  REQUIRE(dims == std::vector<std::uint64_t>{4, 2});
  const double n = static_cast<double>(W), sum0 = 10.0 * n * (n - 1) / 2;
  CHECK(stats == std::vector<double>{0.0, 1.0, sum0 / n, sum0 / n + 1, 10.0 * last, 10.0 * last + 1,
                                     sum0, sum0 + n});
  const auto groups = rb::h5::read_doubles(path, "/sweep/over_ranks/group_size");
  CHECK(groups[2] == 4.0);            // mean over the ranks with a value
  CHECK(groups[6] == 4.0 * (n - 1));  // their sum
  const auto per_iteration =
      rb::h5::read_doubles(path, "/sweep/over_ranks/iteration_time_s", &dims);
  CHECK(dims == std::vector<std::uint64_t>{4, 2, 3});
  CHECK(per_iteration[2 * 6 + 3] == 10.0 * last + 1);  // max at point 1, iteration 0
  CHECK(rb::h5::read_strings(path, "/sweep/over_ranks/statistic") ==
        std::vector<std::string>{"min", "mean", "max", "sum"});
}

TEST_CASE("points table: planned_bytes counts the rows write() keeps") {
  rb::h5::PointsTable t(10);
  t.key("size", std::vector<std::int64_t>(10, 1), {"1", "size"});
  t.metric("time_s", {"s", "time"});
  t.metric("iteration_time_s", {"s", "per iteration"}, {20}, {"iteration"});
  const std::uint64_t at8 = t.planned_bytes(8), at64 = t.planned_bytes(64);
  CHECK(at64 - at8 == 56u * (10 * 21 + 1) * 8);  // without a sample: every rank's row (and scale)
  t.sample_ranks(16);
  const std::uint64_t at1k = t.planned_bytes(1024), at16k = t.planned_bytes(16384);
  CHECK(at1k == at16k);  // with one: the same rows however many ranks
  CHECK(at1k > t.planned_bytes(16));
}

TEST_CASE(
    "points table: keep_points writes the first points in a complete table's layout, and none "
    "as an empty table") {
  const std::string path = rb::test::test_path("metrics", "kept_points");
  const std::size_t W = static_cast<std::size_t>(world());
  {
    rb::h5::File f = rb::h5::File::create(path, MPI_COMM_WORLD, false);
    for (const std::size_t kept : {std::size_t{2}, std::size_t{0}}) {
      rb::h5::Group sweep = f.root().group("kept" + std::to_string(kept));
      rb::h5::PointsTable t(4);
      t.key("size", std::vector<std::int64_t>{8, 16, 32, 64}, {"1", "size"});
      t.key("label", std::vector<std::string>{"a", "b", "c", "d"}, {"1", "label"});
      t.metric("iteration_time_s", {"s", "per iteration"}, {3}, {"iteration"});
      t.int_metric("group_size", {"1", "group"});
      t.text_metric("status", {"1", "outcome"});
      for (std::size_t p = 0; p < kept; ++p) {
        const double mine = 10.0 * rank() + static_cast<double>(p);
        t.set("iteration_time_s", p, std::vector<double>{mine, mine + 1, mine + 2});
        t.set_int("group_size", p, 4);
        t.set_text("status", p, "ok");
      }
      t.keep_points(kept);
      t.keep_points(9);  // more than it has: nothing changes
      CHECK(t.points() == kept);
      t.write(sweep);
    }
    f.close();
  }
  if (rank() != 0) return;
  std::vector<std::uint64_t> dims;
  const auto it = rb::h5::read_doubles(path, "/kept2/iteration_time_s", &dims);
  CHECK(dims == std::vector<std::uint64_t>{W, 2, 3});
  CHECK(it[3 + 2] == 3.0);  // rank 0, point 1, iteration 2
  CHECK(rb::h5::read_ints(path, "/kept2/points/size") == Rows{8, 16});
  CHECK(rb::h5::read_strings(path, "/kept2/points/label") == std::vector<std::string>{"a", "b"});
  CHECK(rb::h5::read_strings(path, "/kept2/status").size() == 2 * W);
  CHECK(rb::h5::read_int_attr(path, "/kept2", "points") == Rows{2});
  CHECK(rb::h5::read_int_attr(path, "/kept0", "points") == Rows{0});
  rb::h5::read_doubles(path, "/kept0/iteration_time_s", &dims);
  CHECK(dims == std::vector<std::uint64_t>{W, 0, 3});
}
