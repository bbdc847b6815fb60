#pragma once
// The one output layout of every sweep (docs/hdf5-schema.md, schema_version 4):
//
//   /sweeps/<name>/points/<key>   [P]                role=key    what identifies point p
//   /sweeps/<name>/<metric>       [world, P, ...]    role=metric what rank r measured at point p
//   /sweeps/<name>/rank, point, <axis>  [n]          role=dimension  the axes' dimension scales
//
// A table that samples ranks (sample_ranks) keeps, above that many ranks, a few ranks per point
// instead of every rank, so its size grows with the points and not with the world:
//
//   /sweeps/<name>/<metric>       [rows, P, ...]     row k of point p: rank row_rank[k, p]
//   /sweeps/<name>/row_rank       [rows, P]          role=key    which rank each row holds
//   /sweeps/<name>/over_ranks/<metric>  [4, P, ...]  min, mean, max, sum over every rank
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
#include <utility>
#include <vector>

#include "metrics/h5.hpp"
#include "metrics/text_table.hpp"

namespace rb::h5 {

// "_s" for "s" and so on; "" for "1". Throws std::invalid_argument for units outside the rule.
std::string unit_suffix(const std::string& units);
// Throws std::invalid_argument naming the dataset when `name` breaks the unit-naming rule.
void check_unit_name(const std::string& name, const std::string& units);

// ---- What the terminal and --json show of a points table ----------------------------------
// One headline number per point and metric: a statistic over each rank's inner values
// (iterations, ring steps), then one over ranks. Both are named in the output, so the same
// number can be recomputed from the file (NaN, and -1 in integer metrics, count as missing).
// Cv: sample standard deviation / mean of the inner values (NaN below two), how much one
// iteration differs from the next. Slowest: the value of the rank whose median over the inner
// values is the largest (the slowest rank's CV, as rb-analysis judges it).
enum class OverInner { None, Median, Sum, Max, Cv };
enum class OverRanks { Max, Min, Mean, Sum, Rank0, Slowest };
struct Headline {
  std::string metric;
  OverInner inner = OverInner::None;
  OverRanks ranks = OverRanks::Max;
  std::string inner_name = "iterations";  // what the inner axis holds, for statistic_text
};
// "median over iterations, max over ranks" (inner dimension named as the metric's units imply).
std::string statistic_text(const Headline& h);
std::string to_string(OverInner o);  // "none" | "median" | "sum" | "max" | "cv"
std::string to_string(OverRanks o);  // "max" | "min" | "mean" | "sum" | "rank0" | "slowest"

// One point as rank 0 shows it: every key and the sweep's headline metrics.
struct PointRecord {
  struct Field {
    std::string name;
    std::string units;      // metrics only
    std::string statistic;  // metrics only
    Headline how;           // metrics only
    bool is_text = false;
    double number = 0;  // NaN: missing
    std::string text;
  };
  std::vector<Field> keys;
  std::vector<Field> metrics;
  // A key's or metric's value by name (NaN / "" when absent).
  double num(const std::string& name) const;
  std::string text(const std::string& name) const;
};

// How rb-analysis judges a sweep's metrics, said once per sweep and written as each metric's
// attributes (Meta's judging fields; docs/hdf5-schema.md, "What a column says"): compare,
// verdict and report read them, so a new sweep or metric needs no analysis change.
struct Judging {
  std::vector<std::string> headline;            // the metrics compare judges every night
  std::string noise;                            // the sweep's run-to-run noise class ("" : "*")
  std::map<std::string, std::string> noise_of;  // per-metric classes where they differ
  std::vector<std::string> lower;  // non-time metrics where lower is better (memory held)
  bool each_rank = false;          // every rank measures its own device (ranks = "each")
  // The metric of per-iteration times that gives the sweep's one-number metrics their spread
  // in compare ("": none); written as the sweep's `iteration_times` attribute.
  std::string iteration_times;
  std::string message_size_key;  // the key compare's --min-bytes filters ("" : none)
};

// The ranks a sampled table keeps at one point, `rows` of them, slowest first: `order` holds
// every rank's value there (larger is slower; NaN: none). More ranks with a value than rows: the
// ranks at evenly spaced quantiles, the slowest and the fastest included; fewer: all of them, then
// -1 (an empty row); none: evenly spaced rank numbers.
std::vector<std::int64_t> pick_rows(const std::vector<double>& order, std::size_t rows);

class PointsTable {
 public:
  explicit PointsTable(std::size_t points) : points_(points) {}
  std::size_t points() const { return points_; }

  // Keys: one value per point, the same on every rank (rank 0's are written).
  void key(const std::string& name, std::vector<std::int64_t> values, const Meta& meta);
  void key(const std::string& name, std::vector<double> values, const Meta& meta);
  void key(const std::string& name, std::vector<std::string> values, const Meta& meta);

  // Metrics: declared once, on every rank, with the shape of one point's value (empty: one
  // number per point and rank). Declaring the same name twice is an error. `axes` names the
  // inner axes ("iteration", "step"): metrics that share an axis share its dimension scale, of
  // one length; unnamed, an axis is the metric's own (<name>_axis<k>).
  void metric(const std::string& name, const Meta& meta, std::vector<std::uint64_t> inner = {},
              std::vector<std::string> axes = {});
  void int_metric(const std::string& name, const Meta& meta, std::vector<std::uint64_t> inner = {},
                  std::vector<std::string> axes = {});
  // `width`: the typical length of a value, for planned_bytes (the file's is the longest).
  void text_metric(const std::string& name, const Meta& meta, std::size_t width = 16);

  // This rank's value at a point. A vector shorter than the declared shape is padded
  // (ring steps of a smaller ring in a column sized for the largest); longer is an error.
  void set(const std::string& name, std::size_t point, double value);
  void set(const std::string& name, std::size_t point, const std::vector<double>& values);
  void set_int(const std::string& name, std::size_t point, std::int64_t value);
  void set_int(const std::string& name, std::size_t point, const std::vector<std::int64_t>& values);
  void set_text(const std::string& name, std::size_t point, const std::string& value);

  // Keeps the first `points` points only (no-op when the table has no more): a sweep a signal
  // stopped writes the points it finished in the same layout as a complete one, fewer of them.
  void keep_points(std::size_t points);

  // How the metrics are judged; names checked against the declared ones at write().
  void judging(Judging j) { judging_ = std::move(j); }

  // Above `rows` ranks, write() keeps `rows` ranks per point instead of every rank: the ranks
  // at evenly spaced quantiles of order() (slowest first), with each numeric metric's min, mean,
  // max and sum over every rank in over_ranks/. At or below `rows` ranks every rank is a row.
  void sample_ranks(std::size_t rows) { sample_rows_ = rows; }
  // This rank's place in point `point`'s order: larger is slower (a rate: pass its negative);
  // NaN (the default): no value, after every rank with one.
  void order(std::size_t point, double value);
  // The rows write() gives a metric at `world` ranks: world, or the sample's rows.
  std::size_t rows_at(std::size_t world) const;
  // The bytes write() puts in the file at `world` ranks (keys, metrics, scales, over_ranks/,
  // each dataset's attributes), a text metric at its typical width: the dry-run's estimate.
  std::uint64_t planned_bytes(std::size_t world) const;

  // Collective: writes `points` (attribute), points/<key> and every metric under `sweep`, and
  // the dimension scales of their axes: rank [world], point [P] and each named inner axis,
  // attached to every key and metric. Every rank must have declared the same metrics
  // (checked; a mismatch throws everywhere).
  void write(Group& sweep) const;

  // Collective over `comm` (each rank passes its own values): every point with its keys and
  // the headline metrics reduced as each Headline says; filled on rank 0, empty elsewhere.
  std::vector<PointRecord> records(const std::vector<Headline>& headlines, MPI_Comm comm) const;

 private:
  struct Column {
    Meta meta;
    std::vector<std::uint64_t> inner;
    std::vector<std::string> axes;  // the inner axes' dimension scales
    char kind = 'd';                // d: double, i: int64, t: text
    std::size_t width = 16;         // text: a value's typical length (planned_bytes)
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
                  std::vector<std::string> axes, char kind);
  // Collective: the dimension scales of `sweep` (`rows` [n], point, the inner axes), each once.
  void write_scales(Group& sweep, const std::string& rows, std::size_t n) const;
  // The inner axes' lengths by name, checked to agree between metrics.
  std::map<std::string, std::uint64_t> inner_axes(const std::string& where) const;
  // Collective (table_rows.cpp): the sample's metrics, row_rank and over_ranks/.
  void write_sampled(Group& sweep) const;
  // Collective: which rank each row holds at each point ([rows x P], row-major), on every rank.
  std::vector<std::int64_t> sampled_rows(MPI_Comm comm) const;
  void write_over_ranks(Group& sweep) const;
  Column& column(const std::string& name, char kind, std::size_t point);
  std::size_t inner_size(const Column& c) const;
  // Checks that `values` (the key's length) is the number of points and the name is new.
  void add_key(const std::string& name, Key k, std::size_t values);
  // This rank's value of a numeric metric at each point after the inner statistic.
  std::vector<double> inner_reduced(const Column& c, OverInner how) const;
  PointRecord::Field key_field(const std::string& name, const Key& k, std::size_t point) const;

  // The metric's Meta as written: its judging from judging_ and its inner axes.
  Meta written_meta(const std::string& name, const Column& c) const;
  // Throws when judging_ names a metric or key the table does not have.
  void check_judging_names(const std::string& where) const;

  std::size_t points_;
  std::size_t sample_rows_ = 0;  // 0: every rank is a row
  std::vector<double> order_;    // this rank's order value per point (NaN: none)
  Judging judging_;
  std::vector<std::pair<std::string, Key>> keys_;  // in declaration order
  std::map<std::string, Column> metrics_;          // sorted: the same order on every rank
};

}  // namespace rb::h5
