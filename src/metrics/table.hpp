#pragma once
// The one output layout of every sweep (docs/hdf5-schema.md, schema_version 2):
//
//   /sweeps/<name>/points/<key>   [P]                role=key    what identifies point p
//   /sweeps/<name>/<metric>       [world, P, ...]    role=metric what rank r measured at point p
//
// A sweep fills a PointsTable while it runs (keys once, then set() per point and metric)
// and writes it with one collective call. Values never set stay NaN (numbers), -1
// (integers) or "" (text), so a point a rank skipped (oom, not in a ring) reads as missing,
// never as zero.
//
// Unit-naming rule: a metric's name ends with the suffix of its unit, and only then:
//   s -> _s, B -> _bytes, B/s -> _Bps, TFLOP/s -> _tflops, FLOP -> _flop, Hz -> _hz;
//   units "1" (counts, ratios, indices, text) take none of these suffixes.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "metrics/h5.hpp"

namespace rb::h5 {

// "_s" for "s" and so on; "" for "1". Throws std::invalid_argument for units outside the rule.
std::string unit_suffix(const std::string& units);
// Throws std::invalid_argument naming the dataset when `name` breaks the unit-naming rule.
void check_unit_name(const std::string& name, const std::string& units);

class PointsTable {
 public:
  explicit PointsTable(std::size_t points) : points_(points) {}
  std::size_t points() const { return points_; }

  // Keys: one value per point, the same on every rank (rank 0's are written).
  void key(const std::string& name, std::vector<std::int64_t> values, const Meta& meta);
  void key(const std::string& name, std::vector<double> values, const Meta& meta);
  void key(const std::string& name, std::vector<std::string> values, const Meta& meta);

  // Metrics: declared once, on every rank, with the shape of one point's value (empty: one
  // number per point and rank). Declaring the same name twice is an error.
  void metric(const std::string& name, const Meta& meta, std::vector<std::uint64_t> inner = {});
  void int_metric(const std::string& name, const Meta& meta, std::vector<std::uint64_t> inner = {});
  void text_metric(const std::string& name, const Meta& meta);

  // This rank's value at a point. A vector shorter than the declared shape is padded
  // (ring steps of a smaller ring in a column sized for the largest); longer is an error.
  void set(const std::string& name, std::size_t point, double value);
  void set(const std::string& name, std::size_t point, const std::vector<double>& values);
  void set_int(const std::string& name, std::size_t point, std::int64_t value);
  void set_int(const std::string& name, std::size_t point, const std::vector<std::int64_t>& values);
  void set_text(const std::string& name, std::size_t point, const std::string& value);

  // Collective: writes `points` (attribute), points/<key> and every metric under `sweep`.
  // Every rank must have declared the same metrics (checked; a mismatch throws everywhere).
  void write(Group& sweep) const;

 private:
  struct Column {
    Meta meta;
    std::vector<std::uint64_t> inner;
    char kind = 'd';  // d: double, i: int64, t: text
    std::vector<double> d;
    std::vector<std::int64_t> i;
    std::vector<std::string> t;
  };
  struct Key {
    Meta meta;
    char kind = 'd';
    std::vector<double> d;
    std::vector<std::int64_t> i;
    std::vector<std::string> t;
  };
  Column& declare(const std::string& name, const Meta& meta, std::vector<std::uint64_t> inner,
                  char kind);
  Column& column(const std::string& name, char kind, std::size_t point);
  std::size_t inner_size(const Column& c) const;
  // Checks that `values` (the key's length) is the number of points and the name is new.
  void add_key(const std::string& name, Key k, std::size_t values);

  std::size_t points_;
  std::vector<std::pair<std::string, Key>> keys_;   // in declaration order
  std::map<std::string, Column> metrics_;           // sorted: the same order on every rank
};

}  // namespace rb::h5
