// Which rows a points table writes, and what they cost in the file. Every rank is a row until a
// table that samples ranks (PointsTable::sample_ranks) runs on more ranks than it keeps: then
// each point keeps a few ranks, the slowest first, and the statistics over every rank beside
// them (over_ranks/), so the file grows with the points, not with the world times the points
// (docs/hdf5-schema.md, "Rows").
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <mpi.h>

#include "metrics/table.hpp"

namespace rb::h5 {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// What HDF5 spends on a dataset besides its values: the object header, the attributes every
// dataset carries (units, description, role and the judging words) and the dimension scales'
// references. Measured on the files of tests/metrics/size_checks.py's runs.
constexpr std::uint64_t kDatasetOverhead = 1400;

// Positions 0 .. n-1 (n > rows) at evenly spaced quantiles, first and last included; distinct,
// since their spacing (n - 1) / (rows - 1) is above 1.
std::size_t quantile_position(std::size_t k, std::size_t n, std::size_t rows) {
  if (rows < 2) return 0;
  return (k * (n - 1) + (rows - 1) / 2) / (rows - 1);
}

}  // namespace

std::vector<std::int64_t> pick_rows(const std::vector<double>& order, std::size_t rows) {
  std::vector<std::int64_t> out(rows, -1);
  std::vector<std::int64_t> valued;
  for (std::size_t r = 0; r < order.size(); ++r)
    if (std::isfinite(order[r])) valued.push_back(static_cast<std::int64_t>(r));
  std::stable_sort(valued.begin(), valued.end(), [&](std::int64_t a, std::int64_t b) {
    return order[static_cast<std::size_t>(a)] > order[static_cast<std::size_t>(b)];
  });
  if (valued.empty()) {  // nothing says who is slow: rank numbers, spread over the world
    for (std::size_t k = 0; k < rows && k < order.size(); ++k)
      out[k] = static_cast<std::int64_t>(
          order.size() > rows ? quantile_position(k, order.size(), rows) : k);
    return out;
  }
  for (std::size_t k = 0; k < rows && k < valued.size(); ++k)
    out[k] = valued[valued.size() > rows ? quantile_position(k, valued.size(), rows) : k];
  return out;
}

void PointsTable::order(std::size_t point, double value) {
  if (point >= points_)
    throw std::logic_error("points table: order of point " + std::to_string(point) + " of " +
                           std::to_string(points_));
  if (order_.empty()) order_.assign(points_, kNaN);
  order_[point] = value;
}

std::size_t PointsTable::rows_at(std::size_t world) const {
  return sample_rows_ > 0 && world > sample_rows_ ? sample_rows_ : world;
}

std::vector<std::int64_t> PointsTable::sampled_rows(MPI_Comm comm) const {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::size_t world = static_cast<std::size_t>(size), rows = sample_rows_;
  const std::vector<double> mine = order_.empty() ? std::vector<double>(points_, kNaN) : order_;
  std::vector<std::int64_t> out(rows * points_, -1);
  // Rank 0 holds every rank's values of a block of points at a time: 16 MiB at most, however
  // large the world.
  const std::size_t block = std::max<std::size_t>(1, (std::size_t{2} << 20) / world);
  std::vector<double> all, one(world);
  for (std::size_t p0 = 0; p0 < points_; p0 += block) {
    const std::size_t n = std::min(block, points_ - p0);
    all.resize(rank == 0 ? n * world : 1);
    MPI_Gather(mine.data() + p0, static_cast<int>(n), MPI_DOUBLE, all.data(), static_cast<int>(n),
               MPI_DOUBLE, 0, comm);
    if (rank != 0) continue;
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t r = 0; r < world; ++r) one[r] = all[r * n + j];
      const std::vector<std::int64_t> picked = pick_rows(one, rows);
      for (std::size_t k = 0; k < rows; ++k) out[k * points_ + p0 + j] = picked[k];
    }
  }
  MPI_Bcast(out.data(), static_cast<int>(out.size()), MPI_INT64_T, 0, comm);
  return out;
}

namespace {

// One column's values at the cells, one inner block each; empty rows (rank -1) hold `missing`.
template <class T>
std::vector<T> cell_values(const std::vector<T>& column, std::size_t block,
                           const std::vector<Group::Cell>& cells,
                           const std::vector<bool>& empty_row, T missing) {
  std::vector<T> out;
  out.reserve(cells.size() * block);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (empty_row[i]) {
      out.insert(out.end(), block, missing);
      continue;
    }
    const auto first = column.begin() + static_cast<std::ptrdiff_t>(cells[i].point * block);
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(block));
  }
  return out;
}

}  // namespace

void PointsTable::write_sampled(Group& sweep) const {
  const std::size_t rows = sample_rows_;
  const std::vector<std::int64_t> row_rank = sampled_rows(sweep.comm());
  int me = 0;
  MPI_Comm_rank(sweep.comm(), &me);
  // This rank's cells; rank 0 also writes the empty rows' missing values (never zero).
  std::vector<Group::Cell> cells;
  std::vector<bool> empty_row;
  for (std::size_t k = 0; k < rows; ++k)
    for (std::size_t p = 0; p < points_; ++p) {
      const std::int64_t r = row_rank[k * points_ + p];
      if (r != me && !(r < 0 && me == 0)) continue;
      cells.push_back({k, p});
      empty_row.push_back(r < 0);
    }
  sweep.write_shared("row_rank", row_rank, {rows, points_},
                     Meta{"1",
                          "the world rank whose values row k of point p holds (-1: an empty row: "
                          "fewer ranks had a value than the sample keeps)",
                          "key"});
  sweep.attach_scales("row_rank", {"row", "point"});
  for (const auto& [name, c] : metrics_) {
    std::vector<std::uint64_t> dims{rows, points_};
    dims.insert(dims.end(), c.inner.begin(), c.inner.end());
    const std::size_t block = std::max<std::size_t>(inner_size(c), 1);
    const Meta meta = written_meta(name, c);
    if (c.kind == 'd')
      sweep.write_cells(name, cell_values(c.d, block, cells, empty_row, kNaN), cells, dims, meta);
    if (c.kind == 'i')
      sweep.write_cells(name, cell_values<std::int64_t>(c.i, block, cells, empty_row, -1), cells,
                        dims, meta);
    if (c.kind == 't')
      sweep.write_cell_strings(name, cell_values<std::string>(c.t, 1, cells, empty_row, ""), cells,
                               dims, meta);
    std::vector<std::string> scales{"row", "point"};
    scales.insert(scales.end(), c.axes.begin(), c.axes.end());
    sweep.attach_scales(name, scales);
  }
  write_over_ranks(sweep);
}

namespace {

constexpr std::size_t kStatistics = 4;  // min, mean, max, sum

// Per value of a numeric column, over every rank with one (NaN, and -1 in integer columns, are
// none): min, mean, max and sum, statistic-major; NaN where no rank had one.
std::vector<double> over_ranks(const std::vector<double>& mine, MPI_Comm comm) {
  const std::size_t n = mine.size();
  std::vector<double> lo(n, INFINITY), hi(n, -INFINITY), sum_count(2 * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(mine[i])) continue;
    lo[i] = hi[i] = sum_count[i] = mine[i];
    sum_count[n + i] = 1;
  }
  const int count = static_cast<int>(n);
  MPI_Allreduce(MPI_IN_PLACE, lo.data(), count, MPI_DOUBLE, MPI_MIN, comm);
  MPI_Allreduce(MPI_IN_PLACE, hi.data(), count, MPI_DOUBLE, MPI_MAX, comm);
  MPI_Allreduce(MPI_IN_PLACE, sum_count.data(), 2 * count, MPI_DOUBLE, MPI_SUM, comm);
  std::vector<double> out(kStatistics * n, kNaN);
  for (std::size_t i = 0; i < n; ++i) {
    const double ranks = sum_count[n + i];
    if (ranks == 0) continue;
    out[i] = lo[i];
    out[n + i] = sum_count[i] / ranks;
    out[2 * n + i] = hi[i];
    out[3 * n + i] = sum_count[i];
  }
  return out;
}

}  // namespace

void PointsTable::write_over_ranks(Group& sweep) const {
  Group g = sweep.group("over_ranks");
  g.write_shared_strings("statistic", {"min", "mean", "max", "sum"},
                         Meta{"1",
                              "the statistic over every rank with a value that row s of each "
                              "dataset holds: min, mean, max, sum",
                              "dimension"});
  g.mark_scale("statistic");
  for (const auto& [name, c] : metrics_) {
    if (c.kind == 't') continue;
    std::vector<double> mine(c.d);
    if (c.kind == 'i')
      for (std::int64_t x : c.i) mine.push_back(x == -1 ? kNaN : static_cast<double>(x));
    std::vector<std::uint64_t> dims{kStatistics, points_};
    dims.insert(dims.end(), c.inner.begin(), c.inner.end());
    Meta meta = written_meta(name, c);
    meta.judged = "no";  // the sweep's own metric is the one compare judges
    meta.description =
        "min, mean, max and sum over every rank with a value of: " + meta.description;
    g.write_shared(name, over_ranks(mine, sweep.comm()), dims, meta);
    std::vector<std::string> scales{"statistic", sweep.path() + "/point"};
    for (const std::string& axis : c.axes) scales.push_back(sweep.path() + "/" + axis);
    g.attach_scales(name, scales);
  }
}

std::uint64_t PointsTable::planned_bytes(std::size_t world) const {
  const std::uint64_t P = points_, rows = rows_at(world);
  const bool sampled = rows != world;
  std::uint64_t values = 0, datasets = 0;
  for (const auto& [name, k] : keys_) {
    std::uint64_t width = 8;
    if (k.kind == 't') {
      width = 1;
      for (const std::string& v : k.t) width = std::max<std::uint64_t>(width, v.size());
    }
    values += P * width;
    ++datasets;
  }
  for (const auto& [name, c] : metrics_) {
    const std::uint64_t inner = inner_size(c);
    values += rows * P * inner * (c.kind == 't' ? c.width : 8);
    ++datasets;
    if (sampled && c.kind != 't') {
      values += kStatistics * P * inner * 8;
      ++datasets;
    }
  }
  // The scales: rows, points and each inner axis (and the statistics, the sample's row_rank).
  const auto axes = inner_axes("(plan)");
  values += (rows + P) * 8;
  datasets += 2 + axes.size();
  for (const auto& [axis, n] : axes) values += n * 8;
  if (sampled) {
    values += rows * P * 8 + kStatistics * 8;
    datasets += 2;
  }
  return values + datasets * kDatasetOverhead;
}

}  // namespace rb::h5
