#include "sweeps/p2p_matrix.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "config/bytes.hpp"
#include "metrics/stats.hpp"
#include "metrics/table.hpp"
#include "profiling/engine.hpp"
#include "profiling/timing.hpp"


namespace rb {
namespace {

struct P2pParams {
  std::uint64_t latency_bytes = 8;
  std::uint64_t bandwidth_bytes = 0;
  std::int64_t warmup = 5;
  std::int64_t iterations = 20;
  std::int64_t latency_iterations = 100;
  bool bidirectional = true;
  bool concurrent = true;
};

// The points: every ordered pair (sender, receiver), one at a time, then (when `concurrent`)
// every shift s, all ranks r -> r + s at once.
struct P2pPoint {
  bool pair = true;
  int sender = -1, receiver = -1;  // -1 for shift points
  int shift = 0;                   // receiver - sender mod world
};

class P2pMatrix final : public Sweep {
 public:
  P2pMatrix(P2pParams p, int world) : p_(p), world_(world) {
    for (int a = 0; a < world_; ++a)
      for (int b = 0; b < world_; ++b)
        if (a != b) points_.push_back({true, a, b, (b - a + world_) % world_});
    if (p_.concurrent)
      for (int s = 1; s < world_; ++s) points_.push_back({false, -1, -1, s});
  }
  std::string type() const override { return "p2p_matrix"; }
  std::size_t point_count() const override { return points_.size(); }
  std::string iterations_text() const override {
    return rb::iterations_text(p_.iterations, p_.warmup) + ", latency " +
           std::to_string(p_.latency_iterations);
  }
  // A pair: the ping-pong's round trips, then the messages at the link rate, twice when both
  // directions are measured too; a shift: the messages at the link rate.
  double estimated_seconds(const CostAssumptions& a) const override {
    const double msgs = static_cast<double>(p_.iterations + p_.warmup);
    const double stream = msgs * static_cast<double>(p_.bandwidth_bytes) / a.link_Bps;
    const double pingpong = static_cast<double>(p_.latency_iterations + p_.warmup) * 2 * a.latency_s;
    double total = 0;
    for (const auto& pt : points_)
      total += a.light_point_s + (pt.pair ? (pingpong + stream) * (p_.bidirectional ? 2 : 1) : stream);
    return total;
  }

  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    for (const auto& pt : points_) lines.push_back(label(pt));
    return lines;
  }
  std::uint64_t estimated_output_bytes() const override {
    return 8u * 8u * static_cast<std::uint64_t>(world_) * (points_.size() + 1) + 4096;
  }
  SweepOutcome run(RunContext& ctx, h5::Group& out) override;

 private:
  std::string label(const P2pPoint& pt) const {
    if (!pt.pair)
      return "concurrent: every rank r -> r+" + std::to_string(pt.shift) + ", " +
             format_bytes(static_cast<double>(p_.bandwidth_bytes));
    return "pair " + std::to_string(pt.sender) + " -> " + std::to_string(pt.receiver) + ": latency " +
           format_bytes(static_cast<double>(p_.latency_bytes)) + ", bandwidth " +
           format_bytes(static_cast<double>(p_.bandwidth_bytes)) +
           (p_.bidirectional && pt.sender < pt.receiver ? ", one way and both ways" : ", one way");
  }
  h5::PointsTable point_table() const;
  std::string screen_tables(const std::vector<h5::PointRecord>& records) const;
  void measure_pair(RunContext& ctx, prof::Engine& link, const P2pPoint& pt, std::size_t pi, h5::PointsTable& t) const;
  void measure_shift(RunContext& ctx, prof::Engine& link, const P2pPoint& pt, std::size_t pi, h5::PointsTable& t) const;

  P2pParams p_;
  int world_;
  std::vector<P2pPoint> points_;
};

// Seconds from a world barrier to this rank's completion of `body`.
template <class F>
double timed(MPI_Comm world, F&& body) {
  RB_MPI_CHECK(MPI_Barrier(world));
  const double t0 = prof::now_s();
  body();
  return prof::now_s() - t0;
}

h5::PointsTable P2pMatrix::point_table() const {
  h5::PointsTable t(points_.size());
  t.key("pattern", prof::column<std::string>(points_, [](const P2pPoint& p) { return p.pair ? "pair" : "concurrent"; }),
        {"1", "pair: one ordered pair alone; concurrent: every rank r sends to r + shift at once"});
  t.key("sender", prof::column<std::int64_t>(points_, [](const P2pPoint& p) { return p.sender; }),
        {"1", "sending rank of a pair point; -1 for concurrent points"});
  t.key("receiver", prof::column<std::int64_t>(points_, [](const P2pPoint& p) { return p.receiver; }),
        {"1", "receiving rank of a pair point; -1 for concurrent points"});
  t.key("shift", prof::column<std::int64_t>(points_, [](const P2pPoint& p) { return p.shift; }),
        {"1", "receiver - sender modulo the world size"});
  t.metric("latency_s", {"s", "one-way latency of latency_bytes messages on this rank of the pair: ping-pong round trip / 2"});
  t.metric("bandwidth_Bps", {"B/s", "one-way bandwidth of bandwidth_bytes messages, iterations in flight, as this rank of the pair completed them"});
  t.metric("latency_bidir_s", {"s", "time per exchange when both ranks of the pair send latency_bytes to each other at once (points with sender < receiver)"});
  t.metric("bandwidth_bidir_Bps", {"B/s", "both directions at once: bytes the pair moved (both ways) per second of this rank (points with sender < receiver)"});
  t.metric("concurrent_bandwidth_Bps", {"B/s", "bandwidth_bytes x iterations / this rank's time while every rank r sent to r + shift and received from r - shift"});
  return t;
}

void P2pMatrix::measure_pair(RunContext& ctx, prof::Engine& link, const P2pPoint& pt, std::size_t pi,
                             h5::PointsTable& t) const {
  const int me = ctx.layout.rank, a = pt.sender, b = pt.receiver;
  const bool is_a = me == a, is_b = me == b;
  const int peer = is_a ? b : a;
  const std::size_t lat = static_cast<std::size_t>(p_.latency_bytes);
  const std::size_t bw = static_cast<std::size_t>(p_.bandwidth_bytes);
  const double iters = static_cast<double>(p_.iterations);
  const double lat_iters = static_cast<double>(p_.latency_iterations);
  // In the direction a -> b: a sends to its peer, b receives from its peer.
  const int a_to = is_a ? peer : -1, a_from = is_a ? -1 : peer;
  // Ping-pong: a sends, b answers; one-way latency = round trip / 2.
  auto pingpong = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n && (is_a || is_b); ++i) {
      link.step(lat, a_to, a_from);
      link.step(lat, a_from, a_to);
    }
    link.sync();
  };
  // One way: a streams `n` messages to b, all in flight at once (a window).
  auto one_way = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n && (is_a || is_b); ++i) link.post(bw, a_to, a_from);
    link.sync();
  };
  // Both ways: each step sends and receives `bytes`; latency steps finish one by one.
  auto exchange = [&](std::size_t bytes, std::int64_t n, bool each_step) {
    for (std::int64_t i = 0; i < n && (is_a || is_b); ++i) {
      if (each_step) link.step(bytes, peer, peer);
      else link.post(bytes, peer, peer);
    }
    link.sync();
  };
  pingpong(p_.warmup);
  const double t_lat = timed(ctx.world, [&] { pingpong(p_.latency_iterations); });
  one_way(p_.warmup);
  const double t_uni = timed(ctx.world, [&] { one_way(p_.iterations); });
  if (is_a || is_b) {
    t.set("latency_s", pi, t_lat / (2.0 * lat_iters));
    t.set("bandwidth_Bps", pi, static_cast<double>(bw) * iters / t_uni);
  }
  if (!p_.bidirectional || a > b) return;
  exchange(lat, p_.warmup, true);
  const double t_lat_bi = timed(ctx.world, [&] { exchange(lat, p_.latency_iterations, true); });
  exchange(bw, p_.warmup, false);
  const double t_bi = timed(ctx.world, [&] { exchange(bw, p_.iterations, false); });
  if (is_a || is_b) {
    t.set("latency_bidir_s", pi, t_lat_bi / lat_iters);
    t.set("bandwidth_bidir_Bps", pi, 2.0 * static_cast<double>(bw) * iters / t_bi);
  }
}

void P2pMatrix::measure_shift(RunContext& ctx, prof::Engine& link, const P2pPoint& pt, std::size_t pi,
                              h5::PointsTable& t) const {
  const int me = ctx.layout.rank;
  const int to = (me + pt.shift) % world_, from = (me - pt.shift + world_) % world_;
  const std::size_t bw = static_cast<std::size_t>(p_.bandwidth_bytes);
  auto shifted = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) link.post(bw, to, from);
    link.sync();
  };
  shifted(p_.warmup);
  const double mine = timed(ctx.world, [&] { shifted(p_.iterations); });
  t.set("concurrent_bandwidth_Bps", pi, static_cast<double>(bw) * static_cast<double>(p_.iterations) / mine);
}

// A pair's figure as its slower end measured it (both ranks of a pair time it).
std::vector<h5::Headline> screen_headlines() {
  using h5::OverInner, h5::OverRanks;
  return {{"latency_s", OverInner::None, OverRanks::Max},
          {"bandwidth_Bps", OverInner::None, OverRanks::Min},
          {"latency_bidir_s", OverInner::None, OverRanks::Max},
          {"bandwidth_bidir_Bps", OverInner::None, OverRanks::Min},
          {"concurrent_bandwidth_Bps", OverInner::None, OverRanks::Min}};
}

constexpr int kFullMatrixRanks = 16;  // above: one summary row per sender

// Sender x receiver matrix of one metric, or for many ranks each sender's min / median / max.
std::string matrix_text(const std::vector<h5::PointRecord>& records, int world,
                        const std::string& metric, double scale, const std::string& title) {
  std::vector<std::vector<double>> m(static_cast<std::size_t>(world),
                                     std::vector<double>(static_cast<std::size_t>(world), NAN));
  for (const auto& r : records)
    if (r.text("pattern") == "pair")
      m[static_cast<std::size_t>(r.num("sender"))][static_cast<std::size_t>(r.num("receiver"))] =
          r.num(metric) * scale;
  if (world <= kFullMatrixRanks) {
    std::vector<h5::TextTable::Column> cols{{"from \\ to", "", true}};
    for (int b = 0; b < world; ++b) cols.push_back({std::to_string(b)});
    h5::TextTable t(cols);
    for (int a = 0; a < world; ++a) {
      std::vector<std::string> row{std::to_string(a)};
      for (int b = 0; b < world; ++b) row.push_back(a == b ? "." : h5::sig3(m[a][b]));
      t.row(row);
    }
    return t.render(title);
  }
  h5::TextTable t({{"from"}, {"min"}, {"to"}, {"median"}, {"max"}, {"to"}});
  for (int a = 0; a < world; ++a) {
    const auto& row = m[static_cast<std::size_t>(a)];
    int lo = -1, hi = -1;  // receivers of the smallest and largest finite value
    for (int b = 0; b < world; ++b) {
      if (std::isnan(row[b])) continue;
      if (lo < 0 || row[b] < row[lo]) lo = b;
      if (hi < 0 || row[b] > row[hi]) hi = b;
    }
    const auto at = [&](int b) { return b < 0 ? NAN : row[b]; };
    t.row({std::to_string(a), h5::sig3(at(lo)), std::to_string(lo), h5::sig3(stats::median(row)),
           h5::sig3(at(hi)), std::to_string(hi)});
  }
  return t.render(title, {"the " + std::to_string(world) + " x " + std::to_string(world) +
                          " matrix is omitted (over " + std::to_string(kFullMatrixRanks) +
                          " ranks): each sender's min, median and max over receivers; every pair "
                          "is in the file and in --json"});
}

std::string P2pMatrix::screen_tables(const std::vector<h5::PointRecord>& records) const {
  std::string s = results_title(*this) + " point to point, one ordered pair at a time\n";
  s += matrix_text(records, world_, "bandwidth_Bps", 1e-9,
                   "  bandwidth (GB/s), " + format_bytes(static_cast<double>(p_.bandwidth_bytes)) +
                       " messages, the slower rank of each pair:");
  s += matrix_text(records, world_, "latency_s", 1e6,
                   "  latency (us), " + format_bytes(static_cast<double>(p_.latency_bytes)) +
                       " messages, half the round trip, the slower rank of each pair:");
  h5::TextTable t({{"shift"}, {"GB/s per rank"}});
  for (const auto& r : records)
    if (r.text("pattern") == "concurrent")
      t.row({h5::fixed(r.num("shift"), 0), h5::sig3(r.num("concurrent_bandwidth_Bps") / 1e9)});
  if (t.rows() > 0)
    s += t.render("  concurrent: every rank r sends to r + shift at once, slowest rank:");
  if (p_.bidirectional) s += "  bidirectional figures (sender < receiver): in the file and in --json\n";
  return s;
}

SweepOutcome P2pMatrix::run(RunContext& ctx, h5::Group& out) {
  prof::EngineSetup setup;
  setup.backend = ctx.backend;
  setup.world = ctx.world;
  setup.nccl_world = ctx.gpu ? &ctx.gpu->world_nccl() : nullptr;
  setup.bytes = static_cast<std::size_t>(std::max(p_.latency_bytes, p_.bandwidth_bytes));
  const std::unique_ptr<prof::Engine> link = prof::make_engine(setup);
  h5::PointsTable table = point_table();
  for (std::size_t pi = 0; pi < points_.size(); ++pi) {
    const P2pPoint& pt = points_[pi];
    ctx.progress.point_started(pi, label(pt));
    if (pt.pair) measure_pair(ctx, *link, pt, pi, table);
    else measure_shift(ctx, *link, pt, pi, table);
  }
  out.attr("transport", coll::transport_name(link->transport()));
  out.attr("latency_bytes", static_cast<std::int64_t>(p_.latency_bytes));
  out.attr("bandwidth_bytes", static_cast<std::int64_t>(p_.bandwidth_bytes));
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.attr("latency_iterations", p_.latency_iterations);
  table.write(out);
  report_results(ctx, table, screen_headlines(), [&](const auto& r) { return screen_tables(r); });
  return {};
}

}  // namespace

std::unique_ptr<Sweep> parse_p2p_matrix(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::Node& n = spec.node;
  n.allow_only({"type", "name", "latency_bytes", "bandwidth_bytes", "warmup", "iterations",
                "latency_iterations", "bidirectional", "concurrent"});
  P2pParams p;
  const bool host = ctx.backend == Backend::Host;
  p.latency_bytes = n.get_bytes("latency_bytes", 8, 1);
  p.bandwidth_bytes = n.get_bytes("bandwidth_bytes", host ? (4u << 20) : (256u << 20), 1);
  if (host && (p.bandwidth_bytes > static_cast<std::uint64_t>(INT32_MAX) ||
               p.latency_bytes > static_cast<std::uint64_t>(INT32_MAX)))
    n.fail("bandwidth_bytes", "messages above 2 GiB - 1 do not fit MPI's int counts on the host path");
  p.warmup = n.get_int("warmup", p.warmup, 0, 1000000);
  p.iterations = n.get_int("iterations", p.iterations, 1, 1000000);
  p.latency_iterations = n.get_int("latency_iterations", p.latency_iterations, 1, 10000000);
  p.bidirectional = n.get_bool("bidirectional", true);
  p.concurrent = n.get_bool("concurrent", true);
  // One rank has no pairs: the run writes 1x1 NaN matrices rather than failing, so a config
  // stays valid at every rank count.
  return std::make_unique<P2pMatrix>(p, ctx.world_size);
}

}  // namespace rb
