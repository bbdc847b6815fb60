#include "metrics/table.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <utility>

#include <mpi.h>

namespace rb::h5 {
namespace {

const std::vector<std::pair<std::string, std::string>>& unit_suffixes() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"s", "_s"}, {"B", "_bytes"}, {"B/s", "_Bps"}, {"TFLOP/s", "_tflops"},
      {"FLOP", "_flop"}, {"Hz", "_hz"}, {"1", ""}};
  return table;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::uint64_t product(const std::vector<std::uint64_t>& dims) {
  std::uint64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

}  // namespace

std::string unit_suffix(const std::string& units) {
  for (const auto& [u, suffix] : unit_suffixes())
    if (u == units) return suffix;
  std::string known;
  for (const auto& [u, suffix] : unit_suffixes()) known += (known.empty() ? "" : ", ") + u;
  throw std::invalid_argument("units '" + units + "' are not in the unit-naming rule (" + known + ")");
}

void check_unit_name(const std::string& name, const std::string& units) {
  const std::string want = unit_suffix(units);
  if (!want.empty()) {
    if (!ends_with(name, want))
      throw std::invalid_argument("dataset '" + name + "' has units '" + units +
                                  "' and so must end in '" + want + "'");
    return;
  }
  for (const auto& [u, suffix] : unit_suffixes())
    if (!suffix.empty() && ends_with(name, suffix))
      throw std::invalid_argument("dataset '" + name + "' ends in '" + suffix +
                                  "' but has units '1' (the suffix means '" + u + "')");
}

void PointsTable::add_key(const std::string& name, Key k, std::size_t values) {
  if (values != points_)
    throw std::logic_error("points table: key '" + name + "' has " + std::to_string(values) +
                           " values for " + std::to_string(points_) + " points");
  for (const auto& [n, existing] : keys_)
    if (n == name) throw std::logic_error("points table: key '" + name + "' declared twice");
  k.meta.role = "key";
  keys_.emplace_back(name, std::move(k));
}

void PointsTable::key(const std::string& name, std::vector<std::int64_t> values, const Meta& meta) {
  Key k{meta, 'i'};
  const std::size_t n = values.size();
  k.i = std::move(values);
  add_key(name, std::move(k), n);
}

void PointsTable::key(const std::string& name, std::vector<double> values, const Meta& meta) {
  Key k{meta, 'd'};
  const std::size_t n = values.size();
  k.d = std::move(values);
  add_key(name, std::move(k), n);
}

void PointsTable::key(const std::string& name, std::vector<std::string> values, const Meta& meta) {
  Key k{meta, 't'};
  const std::size_t n = values.size();
  k.t = std::move(values);
  add_key(name, std::move(k), n);
}

PointsTable::Column& PointsTable::declare(const std::string& name, const Meta& meta,
                                          std::vector<std::uint64_t> inner, char kind) {
  check_unit_name(name, meta.units);
  if (metrics_.count(name)) throw std::logic_error("points table: metric '" + name + "' declared twice");
  Column c;
  c.meta = meta;
  c.meta.role = "metric";
  c.inner = std::move(inner);
  c.kind = kind;
  const std::size_t n = points_ * product(c.inner);
  if (kind == 'd') c.d.assign(n, std::numeric_limits<double>::quiet_NaN());
  if (kind == 'i') c.i.assign(n, -1);
  if (kind == 't') c.t.assign(n, "");
  return metrics_.emplace(name, std::move(c)).first->second;
}

void PointsTable::metric(const std::string& name, const Meta& meta, std::vector<std::uint64_t> inner) {
  declare(name, meta, std::move(inner), 'd');
}
void PointsTable::int_metric(const std::string& name, const Meta& meta, std::vector<std::uint64_t> inner) {
  declare(name, meta, std::move(inner), 'i');
}
void PointsTable::text_metric(const std::string& name, const Meta& meta) { declare(name, meta, {}, 't'); }

std::size_t PointsTable::inner_size(const Column& c) const { return product(c.inner); }

PointsTable::Column& PointsTable::column(const std::string& name, char kind, std::size_t point) {
  auto it = metrics_.find(name);
  if (it == metrics_.end()) throw std::logic_error("points table: metric '" + name + "' was not declared");
  if (it->second.kind != kind)
    throw std::logic_error("points table: metric '" + name + "' set with the wrong value type");
  if (point >= points_)
    throw std::logic_error("points table: metric '" + name + "': point " + std::to_string(point) +
                           " of " + std::to_string(points_));
  return it->second;
}

void PointsTable::set(const std::string& name, std::size_t point, double value) {
  set(name, point, std::vector<double>{value});
}

namespace {

// Copies one point's values into its slot of a column; shorter rows keep the missing marker.
template <class T>
void put_point(std::vector<T>& column, std::size_t per_point, std::size_t point,
               const std::vector<T>& values, const std::string& name) {
  if (values.size() > per_point)
    throw std::logic_error("points table: metric '" + name + "' takes " +
                           std::to_string(per_point) + " values per point, got " +
                           std::to_string(values.size()));
  std::copy(values.begin(), values.end(), column.begin() + static_cast<std::ptrdiff_t>(point * per_point));
}

}  // namespace

void PointsTable::set(const std::string& name, std::size_t point, const std::vector<double>& values) {
  Column& c = column(name, 'd', point);
  put_point(c.d, inner_size(c), point, values, name);
}

void PointsTable::set_int(const std::string& name, std::size_t point, std::int64_t value) {
  set_int(name, point, std::vector<std::int64_t>{value});
}

void PointsTable::set_int(const std::string& name, std::size_t point,
                          const std::vector<std::int64_t>& values) {
  Column& c = column(name, 'i', point);
  put_point(c.i, inner_size(c), point, values, name);
}

void PointsTable::set_text(const std::string& name, std::size_t point, const std::string& value) {
  column(name, 't', point).t[point] = value;
}

void PointsTable::write(Group& sweep) const {
  // Same metric names and shapes everywhere, or the collective writes below would hang.
  std::string signature;
  for (const auto& [name, c] : metrics_) {
    signature += name + ":" + c.kind;
    for (auto d : c.inner) signature += "," + std::to_string(d);
    signature += ";";
  }
  unsigned long long mine = std::hash<std::string>{}(signature), lo = 0, hi = 0;
  MPI_Comm comm = sweep.comm();
  MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm);
  MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
  if (lo != hi)
    throw std::logic_error("points table under " + sweep.path() +
                           ": ranks declared different metrics (this rank: " + signature + ")");

  sweep.attr("points", static_cast<std::int64_t>(points_));
  Group keys = sweep.group("points");
  const std::vector<std::uint64_t> kdims{points_};
  for (const auto& [name, k] : keys_) {
    if (k.kind == 'i') keys.write_shared(name, k.i, kdims, k.meta);
    if (k.kind == 'd') keys.write_shared(name, k.d, kdims, k.meta);
    if (k.kind == 't') keys.write_shared_strings(name, k.t, k.meta);
  }
  for (const auto& [name, c] : metrics_) {
    std::vector<std::uint64_t> dims{points_};
    dims.insert(dims.end(), c.inner.begin(), c.inner.end());
    if (c.kind == 'd') sweep.write_per_rank(name, c.d, dims, c.meta);
    if (c.kind == 'i') sweep.write_per_rank(name, c.i, dims, c.meta);
    if (c.kind == 't') sweep.write_per_rank_strings(name, c.t, c.meta);
  }
}

}  // namespace rb::h5
