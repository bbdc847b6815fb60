#include "metrics/table.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <utility>
#include <algorithm>
#include <cstdio>

#include <mpi.h>

#include "metrics/stats.hpp"
#include "names.hpp"

namespace rb::h5 {
namespace {

const std::vector<std::pair<std::string, std::string>>& unit_suffixes() {
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"s", "_s"},       {"B", "_bytes"}, {"B/s", "_Bps"}, {"TFLOP/s", "_tflops"},
      {"FLOP", "_flop"}, {"Hz", "_hz"},   {"1", ""}};
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
  throw std::invalid_argument("units '" + units + "' are not in the unit-naming rule (" + known +
                              ")");
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
                                          std::vector<std::uint64_t> inner,
                                          std::vector<std::string> axes, char kind) {
  check_unit_name(name, meta.units);
  if (metrics_.count(name))
    throw std::logic_error("points table: metric '" + name + "' declared twice");
  if (!axes.empty() && axes.size() != inner.size())
    throw std::logic_error("points table: metric '" + name + "' names " +
                           std::to_string(axes.size()) + " axes for " +
                           std::to_string(inner.size()) + " inner dimensions");
  for (std::size_t k = axes.size(); k < inner.size(); ++k)
    axes.push_back(name + "_axis" + std::to_string(k + 2));  // axes 0 and 1: rank, point
  Column c;
  c.meta = meta;
  c.meta.role = "metric";
  c.inner = std::move(inner);
  c.axes = std::move(axes);
  c.kind = kind;
  const std::size_t n = points_ * product(c.inner);
  if (kind == 'd') c.d.assign(n, std::numeric_limits<double>::quiet_NaN());
  if (kind == 'i') c.i.assign(n, -1);
  if (kind == 't') c.t.assign(n, "");
  return metrics_.emplace(name, std::move(c)).first->second;
}

void PointsTable::metric(const std::string& name, const Meta& meta,
                         std::vector<std::uint64_t> inner, std::vector<std::string> axes) {
  declare(name, meta, std::move(inner), std::move(axes), 'd');
}
void PointsTable::int_metric(const std::string& name, const Meta& meta,
                             std::vector<std::uint64_t> inner, std::vector<std::string> axes) {
  declare(name, meta, std::move(inner), std::move(axes), 'i');
}
void PointsTable::text_metric(const std::string& name, const Meta& meta, std::size_t width) {
  declare(name, meta, {}, {}, 't').width = width;
}

std::size_t PointsTable::inner_size(const Column& c) const {
  return product(c.inner);
}

PointsTable::Column& PointsTable::column(const std::string& name, char kind, std::size_t point) {
  auto it = metrics_.find(name);
  if (it == metrics_.end())
    throw std::logic_error("points table: metric '" + name + "' was not declared");
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
  std::copy(values.begin(), values.end(),
            column.begin() + static_cast<std::ptrdiff_t>(point * per_point));
}

}  // namespace

void PointsTable::set(const std::string& name, std::size_t point,
                      const std::vector<double>& values) {
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

void PointsTable::keep_points(std::size_t points) {
  if (points >= points_) return;
  // Storage is point-major, so the first points are each vector's head; a kind's unused vectors
  // are empty and stay so.
  const auto cut = [](auto& values, std::size_t n) {
    if (values.size() > n) values.resize(n);
  };
  for (auto& entry : keys_) {
    Key& k = entry.second;
    cut(k.d, points);
    cut(k.i, points);
    cut(k.t, points);
  }
  for (auto& entry : metrics_) {
    Column& c = entry.second;
    const std::size_t n = points * inner_size(c);
    cut(c.d, n);
    cut(c.i, n);
    cut(c.t, n);
  }
  cut(order_, points);
  points_ = points;
}

void PointsTable::write(Group& sweep) const {
  // Same metric names and shapes everywhere, or the collective writes below would hang.
  std::string signature;
  for (const auto& [name, c] : metrics_) {
    signature += name + ":" + c.kind;
    for (std::size_t k = 0; k < c.inner.size(); ++k)
      signature += "," + c.axes[k] + "=" + std::to_string(c.inner[k]);
    signature += ";";
  }
  unsigned long long mine = std::hash<std::string>{}(signature), lo = 0, hi = 0;
  MPI_Comm comm = sweep.comm();
  MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm);
  MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
  if (lo != hi)
    throw std::logic_error("points table under " + sweep.path() +
                           ": ranks declared different metrics (this rank: " + signature + ")");

  check_judging_names(sweep.path());
  sweep.attr("points", static_cast<std::int64_t>(points_));
  sweep.attr("iteration_times", judging_.iteration_times);
  int world = 1;
  MPI_Comm_size(comm, &world);
  const std::size_t rows = rows_at(static_cast<std::size_t>(world));
  const bool sampled = rows != static_cast<std::size_t>(world);
  write_scales(sweep, sampled ? "row" : "rank", rows);
  Group keys = sweep.group("points");
  const std::vector<std::uint64_t> kdims{points_};
  for (const auto& [name, k] : keys_) {
    Meta meta = k.meta;
    if (name == judging_.message_size_key) meta.inner_axis = "message_size";
    if (k.kind == 'i') keys.write_shared(name, k.i, kdims, meta);
    if (k.kind == 'd') keys.write_shared(name, k.d, kdims, meta);
    if (k.kind == 't') keys.write_shared_strings(name, k.t, meta);
    keys.attach_scales(name, {sweep.path() + "/point"});
  }
  if (sampled) {
    write_sampled(sweep);
    return;
  }
  for (const auto& [name, c] : metrics_) {
    std::vector<std::uint64_t> dims{points_};
    dims.insert(dims.end(), c.inner.begin(), c.inner.end());
    const Meta meta = written_meta(name, c);
    if (c.kind == 'd') sweep.write_per_rank(name, c.d, dims, meta);
    if (c.kind == 'i') sweep.write_per_rank(name, c.i, dims, meta);
    if (c.kind == 't') sweep.write_per_rank_strings(name, c.t, meta);
    std::vector<std::string> scales{"rank", "point"};
    scales.insert(scales.end(), c.axes.begin(), c.axes.end());
    sweep.attach_scales(name, scales);
  }
}

Meta PointsTable::written_meta(const std::string& name, const Column& c) const {
  const Judging& j = judging_;
  Meta m = c.meta;
  if (std::find(j.headline.begin(), j.headline.end(), name) != j.headline.end())
    m.judged = "headline";
  if (std::find(j.lower.begin(), j.lower.end(), name) != j.lower.end()) m.direction = "lower";
  if (j.each_rank) m.ranks = "each";
  const auto own = j.noise_of.find(name);
  if (m.noise.empty()) m.noise = own != j.noise_of.end() ? own->second : j.noise;
  for (const std::string& axis : c.axes) m.inner_axis += (m.inner_axis.empty() ? "" : ",") + axis;
  const std::string wrong = check_judging(m);
  if (!wrong.empty()) throw std::logic_error("metric '" + name + "': " + wrong);
  return m;
}

void PointsTable::check_judging_names(const std::string& where) const {
  const Judging& j = judging_;
  std::vector<std::string> named = j.headline;
  named.insert(named.end(), j.lower.begin(), j.lower.end());
  for (const auto& [metric, cls] : j.noise_of) named.push_back(metric);
  if (!j.iteration_times.empty()) named.push_back(j.iteration_times);
  for (const std::string& n : named)
    if (!metrics_.count(n))
      throw std::logic_error("points table under " + where + ": judging names metric '" + n +
                             "', which the table does not declare");
  const bool key_found = std::any_of(keys_.begin(), keys_.end(),
                                     [&](const auto& k) { return k.first == j.message_size_key; });
  if (!j.message_size_key.empty() && !key_found)
    throw std::logic_error("points table under " + where + ": judging names key '" +
                           j.message_size_key + "', which the table does not have");
}

std::map<std::string, std::uint64_t> PointsTable::inner_axes(const std::string& where) const {
  std::map<std::string, std::uint64_t> axes;  // sorted: the same order on every rank
  for (const auto& [name, c] : metrics_)
    for (std::size_t k = 0; k < c.inner.size(); ++k) {
      const auto [it, added] = axes.emplace(c.axes[k], c.inner[k]);
      if (!added && it->second != c.inner[k])
        throw std::logic_error("points table under " + where + ": axis '" + c.axes[k] + "' of '" +
                               name + "' has length " + std::to_string(c.inner[k]) +
                               ", another metric's " + std::to_string(it->second));
    }
  return axes;
}

void PointsTable::write_scales(Group& sweep, const std::string& rows, std::size_t n) const {
  const std::map<std::string, std::uint64_t> axes = inner_axes(sweep.path());
  for (const char* taken : {"rank", "row", "row_rank", "over_ranks", "point", "points"})
    if (metrics_.count(taken) || axes.count(taken))
      throw std::logic_error("points table under " + sweep.path() + ": '" + taken +
                             "' names a dimension scale, not a metric or inner axis");
  for (const auto& [axis, n] : axes)
    if (metrics_.count(axis))
      throw std::logic_error("points table under " + sweep.path() + ": axis '" + axis +
                             "' has a metric's name");
  if (rows == "rank")
    sweep.dimension_scale("rank", n, "MPI rank in MPI_COMM_WORLD: axis 0 of every metric");
  else
    sweep.dimension_scale(rows, n,
                          "row of a sample of ranks: axis 0 of every metric; row_rank says which "
                          "rank a row holds at each point");
  sweep.dimension_scale("point", points_,
                        "point index: the axis of points/<key>, axis 1 of every metric");
  for (const auto& [axis, n] : axes)
    sweep.dimension_scale(axis, n,
                          "index along the inner axis '" + axis + "' of the metrics that have it");
}

}  // namespace rb::h5

// ---- headline records ---------------------------------------------------------------------

namespace rb::h5 {
namespace {

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

const std::pair<OverInner, const char*> kOverInner[] = {{OverInner::None, "none"},
                                                        {OverInner::Median, "median"},
                                                        {OverInner::Sum, "sum"},
                                                        {OverInner::Max, "max"},
                                                        {OverInner::Cv, "cv"}};
const std::pair<OverRanks, const char*> kOverRanks[] = {
    {OverRanks::Max, "max"}, {OverRanks::Min, "min"},     {OverRanks::Mean, "mean"},
    {OverRanks::Sum, "sum"}, {OverRanks::Rank0, "rank0"}, {OverRanks::Slowest, "slowest"}};

// Rank 0's value, or a metric's one value where it has no inner axis.
double first(const std::vector<double>& v) {
  return v.empty() ? kMissing : v[0];
}

// The statistic each way of summing up names; a way not listed keeps the first value (rank 0's,
// or the one value of a metric without an inner axis).
using Statistic = double (*)(const std::vector<double>&);
const std::pair<OverRanks, Statistic> kRankStatistic[] = {{OverRanks::Max, stats::max},
                                                          {OverRanks::Min, stats::min},
                                                          {OverRanks::Mean, stats::mean},
                                                          {OverRanks::Sum, stats::sum}};
const std::pair<OverInner, Statistic> kInnerStatistic[] = {{OverInner::Median, stats::median},
                                                           {OverInner::Max, stats::max},
                                                           {OverInner::Sum, stats::sum},
                                                           {OverInner::Cv, stats::cv}};

template <class How, std::size_t N>
double summed_up(const std::pair<How, Statistic> (&statistics)[N], How how,
                 const std::vector<double>& v) {
  for (const auto& [way, statistic] : statistics)
    if (way == how) return statistic(v);
  return first(v);
}

double over_ranks(const std::vector<double>& v, OverRanks how) {
  if (how == OverRanks::Slowest)
    throw std::logic_error("over_ranks: 'slowest' needs the ranks' medians");
  return summed_up(kRankStatistic, how, v);
}

double over_inner(const std::vector<double>& v, OverInner how) {
  return summed_up(kInnerStatistic, how, v);
}

}  // namespace

std::string to_string(OverInner o) {
  return name_of(kOverInner, o, "none");
}

std::string to_string(OverRanks o) {
  return name_of(kOverRanks, o, "rank0");
}

std::string statistic_text(const Headline& h) {
  const std::string ranks = h.ranks == OverRanks::Rank0     ? "rank 0's value"
                            : h.ranks == OverRanks::Slowest ? "the slowest rank's (largest median)"
                                                            : to_string(h.ranks) + " over ranks";
  if (h.inner == OverInner::None) return ranks;
  return to_string(h.inner) + " over " + h.inner_name + ", " + ranks;
}

double PointRecord::num(const std::string& name) const {
  for (const auto* fields : {&keys, &metrics})
    for (const Field& f : *fields)
      if (f.name == name) return f.is_text ? kMissing : f.number;
  return kMissing;
}

std::string PointRecord::text(const std::string& name) const {
  for (const auto* fields : {&keys, &metrics})
    for (const Field& f : *fields)
      if (f.name == name) return f.is_text ? f.text : "";
  return "";
}

std::vector<double> PointsTable::inner_reduced(const Column& c, OverInner how) const {
  const std::size_t k = std::max<std::size_t>(inner_size(c), 1);
  std::vector<double> out(points_, kMissing);
  std::vector<double> one(k);
  for (std::size_t p = 0; p < points_; ++p) {
    for (std::size_t j = 0; j < k; ++j) {
      if (c.kind == 'd') one[j] = c.d[p * k + j];
      // -1 is the integer metrics' missing marker.
      else
        one[j] = c.i[p * k + j] == -1 ? kMissing : static_cast<double>(c.i[p * k + j]);
    }
    out[p] = over_inner(one, how);
  }
  return out;
}

PointRecord::Field PointsTable::key_field(const std::string& name, const Key& k,
                                          std::size_t point) const {
  PointRecord::Field f;
  f.name = name;
  f.units = k.meta.units;
  f.is_text = k.kind == 't';
  if (k.kind == 't') f.text = k.t[point];
  if (k.kind == 'd') f.number = k.d[point];
  if (k.kind == 'i') f.number = static_cast<double>(k.i[point]);
  return f;
}

namespace {

// Rank 0: every rank's `mine` (one value per point), rank-major; elsewhere: empty.
std::vector<double> gathered(const std::vector<double>& mine, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<double> all(rank == 0 ? mine.size() * static_cast<std::size_t>(size) : 1);
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
             static_cast<int>(mine.size()), MPI_DOUBLE, 0, comm);
  return all;
}

// The value of the rank whose median at `point` is the largest (NaN medians never win).
double slowest_rank_value(const std::vector<double>& per_rank, const std::vector<double>& medians,
                          std::size_t point, std::size_t points) {
  double worst = kMissing, value = kMissing;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    const double m = medians[r * points + point];
    if (!std::isnan(m) && !(m <= worst)) {
      worst = m;
      value = per_rank[r];
    }
  }
  return value;
}

}  // namespace

std::vector<PointRecord> PointsTable::records(const std::vector<Headline>& headlines,
                                              MPI_Comm comm) const {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<PointRecord> out(rank == 0 ? points_ : 0);
  for (std::size_t p = 0; p < out.size(); ++p)
    for (const auto& [name, k] : keys_) out[p].keys.push_back(key_field(name, k, p));
  for (const Headline& h : headlines) {
    const auto it = metrics_.find(h.metric);
    if (it == metrics_.end())
      throw std::logic_error("points table: headline metric '" + h.metric + "' was not declared");
    const Column& c = it->second;
    PointRecord::Field f;
    f.name = h.metric;
    f.units = c.meta.units;
    f.how = h;
    f.statistic = statistic_text(h);
    f.is_text = c.kind == 't';
    if (f.is_text) {  // text metrics: rank 0's (the sweeps keep them equal where shown)
      for (std::size_t p = 0; p < out.size(); ++p) {
        f.text = c.t[p];
        out[p].metrics.push_back(f);
      }
      continue;
    }
    const std::vector<double> all = gathered(inner_reduced(c, h.inner), comm);
    // Slowest: each point's value from the rank with the largest median (every rank gathers).
    const std::vector<double> medians = h.ranks == OverRanks::Slowest
                                            ? gathered(inner_reduced(c, OverInner::Median), comm)
                                            : std::vector<double>();
    std::vector<double> per_rank(static_cast<std::size_t>(size));
    for (std::size_t p = 0; p < out.size(); ++p) {
      for (std::size_t r = 0; r < per_rank.size(); ++r) per_rank[r] = all[r * points_ + p];
      f.number = h.ranks == OverRanks::Slowest ? slowest_rank_value(per_rank, medians, p, points_)
                                               : over_ranks(per_rank, h.ranks);
      out[p].metrics.push_back(f);
    }
  }
  return out;
}

}  // namespace rb::h5
