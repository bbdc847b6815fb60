#include "sweeps/p2p_matrix.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>
#include <utility>

#include "config/bytes.hpp"
#include "metrics/stats.hpp"
#include "metrics/table.hpp"
#include "profiling/engine.hpp"
#include "profiling/pair_schedule.hpp"
#include "profiling/timing.hpp"

namespace rb {
namespace {

struct P2pParams {  // the key table's defaults (p2p_matrix_keys) unless set
  std::uint64_t latency_bytes = 0;
  std::uint64_t bandwidth_bytes = 0;
  std::int64_t warmup = 0;
  std::int64_t iterations = 0;
  std::int64_t latency_iterations = 0;
  bool bidirectional = true;
  bool concurrent = true;
  prof::PairSpec pairs;  // which ordered pairs (pairs:, seed:)
  bool rounds = true;    // schedule: rounds (disjoint pairs at once) | serial (one pair at a time)
};

// The points: the pairs round by round (a round's pairs are measured at the same time, each rank
// in at most one of them), then (when `concurrent`) every shift s, all ranks r -> r + s at once.
struct P2pPoint {
  bool pair = true;
  int sender = -1, receiver = -1;  // -1 for shift points
  int shift = 0;                   // receiver - sender mod world
  int round = -1;                  // -1 for shift points
};

using Rounds = std::vector<std::vector<prof::Pair>>;

// Ranks up to which every shift is measured, and the shifts beyond (every shift is a round in
// which every rank sends: measured all, they are world x world of work and of output).
constexpr int kAllShiftsRanks = 64;
constexpr int kSampledShifts = 64;
// Ranks above which the table keeps a sample of rows per point (docs/hdf5-schema.md, "Rows").
constexpr std::size_t kP2pRows = 8;

// The shifts s of the concurrent points: every s = 1 .. world-1 up to kAllShiftsRanks ranks;
// beyond, kSampledShifts evenly spaced from 1 to world - 1 and every power of two (the node
// sizes' multiples on nodes of 2^k ranks), ascending.
std::vector<int> shifts_of(int world) {
  std::vector<int> out;
  if (world <= kAllShiftsRanks) {
    for (int s = 1; s < world; ++s) out.push_back(s);
    return out;
  }
  const long long span = world - 2;
  for (long long i = 0; i < kSampledShifts; ++i)
    out.push_back(
        static_cast<int>(1 + (i * span + (kSampledShifts - 1) / 2) / (kSampledShifts - 1)));
  for (long long s = 2; s < world; s *= 2) out.push_back(static_cast<int>(s));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The rounds a run measures on `node_of`: disjoint pairs together, or (serial) one pair each.
Rounds measured_rounds(const P2pParams& p, const std::vector<int>& node_of) {
  if (p.rounds) return prof::rounds_for(p.pairs, node_of);
  Rounds one_each;
  for (const prof::Pair& pair : prof::select_pairs(p.pairs, node_of)) one_each.push_back({pair});
  return one_each;
}

std::vector<P2pPoint> points_of(const Rounds& rounds, int world, bool concurrent) {
  std::vector<P2pPoint> points;
  for (std::size_t r = 0; r < rounds.size(); ++r)
    for (const prof::Pair& p : rounds[r])
      points.push_back({true, p.sender, p.receiver, (p.receiver - p.sender + world) % world,
                        static_cast<int>(r)});
  if (concurrent)
    for (int s : shifts_of(world)) points.push_back({false, -1, -1, s, -1});
  return points;
}

class P2pMatrix final : public Sweep {
 public:
  // The plan knows the job's size only: it assumes `nodes` equal blocks of ranks (the run
  // measures the pairs of the real layout; docs/sweeps/p2p_matrix.md).
  P2pMatrix(P2pParams p, int world, int nodes, bool host)
      : p_(p), world_(world), host_(host), planned_layout_(prof::block_layout(world, nodes)) {}
  std::string type() const override { return "p2p_matrix"; }
  // By arithmetic: 1,024 ranks would otherwise list a million pairs to count them.
  std::size_t point_count() const override {
    return static_cast<std::size_t>(planned_pairs()) + shift_count();
  }
  std::string iterations_text() const override {
    return rb::iterations_text(p_.iterations, p_.warmup) + ", latency " +
           std::to_string(p_.latency_iterations) + "; pairs " + prof::to_string(p_.pairs) + ": " +
           std::to_string(planned_pairs()) + " in " + std::to_string(planned_rounds()) +
           (p_.rounds ? " rounds" : " (serial)") +
           (p_.concurrent && world_ > kAllShiftsRanks
                ? "; " + std::to_string(shift_count()) + " of " + std::to_string(world_ - 1) +
                      " shifts"
                : "");
  }
  // A round: the ping-pong's round trips, then the messages at the link rate, twice when both
  // directions are measured too (its pairs run side by side, each on its own link); a shift:
  // the messages at the link rate.
  double estimated_seconds(const CostAssumptions& a) const override {
    const double msgs = static_cast<double>(p_.iterations + p_.warmup);
    const double stream = msgs * static_cast<double>(p_.bandwidth_bytes) / a.link_Bps;
    const double pingpong =
        static_cast<double>(p_.latency_iterations + p_.warmup) * 2 * a.latency_s;
    const double round = a.light_point_s + (pingpong + stream) * (p_.bidirectional ? 2 : 1);
    return static_cast<double>(planned_rounds()) * round +
           static_cast<double>(shift_count()) * (a.light_point_s + stream);
  }

  std::vector<std::string> plan() const override {
    const Rounds rounds = measured_rounds(p_, planned_layout_);
    std::vector<std::string> lines;
    for (const auto& pt : points_of(rounds, world_, p_.concurrent))
      lines.push_back(label(pt, pt.pair ? rounds[pt.round].size() : 0, rounds.size()));
    return lines;
  }
  // The table as write() lays it out, by arithmetic: its size is affine in the points (a pair
  // and a shift point give every key its width), and a million pairs are never listed.
  std::uint64_t estimated_output_bytes() const override {
    const std::size_t world = static_cast<std::size_t>(world_);
    const P2pPoint pair{true, 0, 1, 1, 0}, shift{false, -1, -1, 1, -1};
    const std::uint64_t two = point_table({pair, shift}).planned_bytes(world);
    const std::uint64_t three = point_table({pair, shift, pair}).planned_bytes(world);
    const std::uint64_t n = point_count();
    return n >= 2 ? two + (n - 2) * (three - two) : two;
  }
  SweepOutcome run(RunContext& ctx, h5::Group& out) override;
  // The MPI engine holds a send and a receive buffer of the larger message size on the host
  // (2 x 2 GiB at the host path's largest bandwidth_bytes); the NCCL engine's are on the GPU.
  std::optional<HostMemoryNeed> host_memory_need() const override {
    if (!host_) return std::nullopt;
    const bool bandwidth = p_.bandwidth_bytes >= p_.latency_bytes;
    return HostMemoryNeed{bandwidth ? "bandwidth_bytes" : "latency_bytes",
                          2 * std::max(p_.latency_bytes, p_.bandwidth_bytes),
                          "the p2p_matrix sweep (send and receive buffers of " +
                              std::string(bandwidth ? "bandwidth_bytes" : "latency_bytes") + ")"};
  }

 private:
  std::uint64_t planned_pairs() const {
    return prof::count_pairs(p_.pairs, prof::node_sizes(planned_layout_));
  }
  std::uint64_t planned_rounds() const {
    if (!p_.rounds) return planned_pairs();
    if (prof::covers_all_pairs(p_.pairs, world_)) return prof::tournament_round_count(world_);
    return measured_rounds(p_, planned_layout_).size();  // first fit over the listed pairs
  }
  std::size_t shift_count() const { return p_.concurrent ? shifts_of(world_).size() : 0; }
  std::string label(const P2pPoint& pt, std::size_t round_pairs, std::size_t rounds) const {
    if (!pt.pair)
      return "concurrent: every rank r -> r+" + std::to_string(pt.shift) + ", " +
             format_bytes(static_cast<double>(p_.bandwidth_bytes));
    return "pair " + std::to_string(pt.sender) + " -> " + std::to_string(pt.receiver) +
           ": latency " + format_bytes(static_cast<double>(p_.latency_bytes)) + ", bandwidth " +
           format_bytes(static_cast<double>(p_.bandwidth_bytes)) +
           (p_.bidirectional && pt.sender < pt.receiver ? ", one way and both ways" : ", one way") +
           "; round " + std::to_string(pt.round + 1) + "/" + std::to_string(rounds) +
           (round_pairs > 1 ? " with " + std::to_string(round_pairs) + " pairs at once" : "");
  }
  h5::PointsTable point_table(const std::vector<P2pPoint>& points) const;
  std::string screen_tables(const std::vector<h5::PointRecord>& records, std::size_t rounds,
                            std::size_t width) const;
  void measure_round(RunContext& ctx, prof::Engine& link, const std::vector<prof::Pair>& round,
                     std::size_t first, int round_index, h5::PointsTable& t) const;
  void measure_shift(RunContext& ctx, prof::Engine& link, const P2pPoint& pt, std::size_t pi,
                     h5::PointsTable& t) const;

  P2pParams p_;
  int world_;
  bool host_;  // the host path: the engine's buffers are in host memory
  std::vector<int> planned_layout_;
};

// Seconds from a world barrier to this rank's completion of `body`.
template <class F>
double timed(MPI_Comm world, F&& body) {
  RB_MPI_CHECK(MPI_Barrier(world));
  const double t0 = prof::now_s();
  body();
  return prof::now_s() - t0;
}

h5::PointsTable P2pMatrix::point_table(const std::vector<P2pPoint>& points) const {
  h5::PointsTable t(points.size());
  t.key("pattern",
        prof::column<std::string>(points,
                                  [](const P2pPoint& p) { return p.pair ? "pair" : "concurrent"; }),
        {"1",
         "pair: one ordered pair (with the other pairs of its round); concurrent: every rank r "
         "sends to r + shift at once"});
  t.key("sender", prof::column<std::int64_t>(points, [](const P2pPoint& p) { return p.sender; }),
        {"1", "sending rank of a pair point; -1 for concurrent points"});
  t.key("receiver",
        prof::column<std::int64_t>(points, [](const P2pPoint& p) { return p.receiver; }),
        {"1", "receiving rank of a pair point; -1 for concurrent points"});
  t.key("shift", prof::column<std::int64_t>(points, [](const P2pPoint& p) { return p.shift; }),
        {"1", "receiver - sender modulo the world size"});
  t.metric("latency_s", {"s",
                         "one-way latency of latency_bytes messages on this rank of the pair: "
                         "ping-pong round trip / 2"});
  t.metric("bandwidth_Bps", {"B/s",
                             "one-way bandwidth of bandwidth_bytes messages, iterations in flight, "
                             "as this rank of the pair completed them"});
  t.metric("latency_bidir_s", {"s",
                               "time per exchange when both ranks of the pair send latency_bytes "
                               "to each other at once (points with sender < receiver)"});
  t.metric("bandwidth_bidir_Bps", {"B/s",
                                   "both directions at once: bytes the pair moved (both ways) per "
                                   "second of this rank (points with sender < receiver)"});
  t.metric("concurrent_bandwidth_Bps",
           {"B/s",
            "bandwidth_bytes x iterations / this rank's time while every rank r sent to r + shift "
            "and received from r - shift"});
  t.metric("round", {"1",
                     "the round (0-based) in which this rank of the pair measured it; the pairs of "
                     "a round run at the same time, no rank in two of them"});
  t.metric("pairs_in_round",
           {"1", "pairs measured at the same time as this one, itself included (1: alone)"});
  t.sample_ranks(kP2pRows);
  h5::Judging j;
  j.headline = {"bandwidth_Bps", "latency_s"};
  j.noise = "p2p_bandwidth";
  j.noise_of = {{"latency_s", "latency"}, {"latency_bidir_s", "latency"}};
  t.judging(std::move(j));
  return t;
}

// The pairs of one round at the same time; ranks outside them only join the barriers. Its
// points are first .. first + round.size() - 1, in the round's order.
void P2pMatrix::measure_round(RunContext& ctx, prof::Engine& link,
                              const std::vector<prof::Pair>& round, std::size_t first,
                              int round_index, h5::PointsTable& t) const {
  const int me = ctx.layout.rank;
  std::size_t pi = round.size();  // this rank's pair in the round, if any
  for (std::size_t i = 0; i < round.size(); ++i)
    if (round[i].sender == me || round[i].receiver == me) pi = i;
  const int a = pi < round.size() ? round[pi].sender : -1,
            b = pi < round.size() ? round[pi].receiver : -1;
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
  // Both ways, by the pairs with sender < receiver: each step sends and receives `bytes`;
  // latency steps finish one by one.
  const bool both_ways = (is_a || is_b) && a < b;
  auto exchange = [&](std::size_t bytes, std::int64_t n, bool each_step) {
    for (std::int64_t i = 0; i < n && both_ways; ++i) {
      if (each_step)
        link.step(bytes, peer, peer);
      else
        link.post(bytes, peer, peer);
    }
    link.sync();
  };
  pingpong(p_.warmup);
  const double t_lat = timed(ctx.world, [&] { pingpong(p_.latency_iterations); });
  one_way(p_.warmup);
  const double t_uni = timed(ctx.world, [&] { one_way(p_.iterations); });
  if (is_a || is_b) {
    const std::size_t point = first + pi;
    t.set("latency_s", point, t_lat / (2.0 * lat_iters));
    t.set("bandwidth_Bps", point, static_cast<double>(bw) * iters / t_uni);
    t.set("round", point, static_cast<double>(round_index));
    t.set("pairs_in_round", point, static_cast<double>(round.size()));
    t.order(point, -static_cast<double>(bw) * iters / t_uni);  // the slower end first
  }
  // Every rank knows the round, so all skip the both-ways barriers together when none needs them.
  const bool any_both_ways = std::any_of(round.begin(), round.end(),
                                         [](const prof::Pair& p) { return p.sender < p.receiver; });
  if (!p_.bidirectional || !any_both_ways) return;
  exchange(lat, p_.warmup, true);
  const double t_lat_bi = timed(ctx.world, [&] { exchange(lat, p_.latency_iterations, true); });
  exchange(bw, p_.warmup, false);
  const double t_bi = timed(ctx.world, [&] { exchange(bw, p_.iterations, false); });
  if (both_ways) {
    t.set("latency_bidir_s", first + pi, t_lat_bi / lat_iters);
    t.set("bandwidth_bidir_Bps", first + pi, 2.0 * static_cast<double>(bw) * iters / t_bi);
  }
}

void P2pMatrix::measure_shift(RunContext& ctx, prof::Engine& link, const P2pPoint& pt,
                              std::size_t pi, h5::PointsTable& t) const {
  const int me = ctx.layout.rank;
  const int to = (me + pt.shift) % world_, from = (me - pt.shift + world_) % world_;
  const std::size_t bw = static_cast<std::size_t>(p_.bandwidth_bytes);
  auto shifted = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) link.post(bw, to, from);
    link.sync();
  };
  shifted(p_.warmup);
  const double mine = timed(ctx.world, [&] { shifted(p_.iterations); });
  const double rate = static_cast<double>(bw) * static_cast<double>(p_.iterations) / mine;
  t.set("concurrent_bandwidth_Bps", pi, rate);
  t.order(pi, -rate);  // the slowest rank first
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
                        const std::string& metric, double scale, const std::string& title,
                        std::size_t width) {
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
    return t.render(title, {}, width);
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
  return t.render(title,
                  {"the " + std::to_string(world) + " x " + std::to_string(world) +
                   " matrix is omitted (over " + std::to_string(kFullMatrixRanks) +
                   " ranks): each sender's min, median and max over receivers; every pair "
                   "is in the file and in --json"},
                  width);
}

std::string P2pMatrix::screen_tables(const std::vector<h5::PointRecord>& records,
                                     std::size_t rounds, std::size_t width) const {
  std::size_t pairs = 0;
  for (const auto& r : records) pairs += r.text("pattern") == "pair" ? 1 : 0;
  const std::string title =
      results_title(*this) + " point to point, pairs " + prof::to_string(p_.pairs) + ": " +
      std::to_string(pairs) + " ordered pairs " +
      (p_.rounds ? "in " + std::to_string(rounds) + " rounds of disjoint pairs at once"
                 : "one at a time");
  std::string s = width == 0 ? title + "\n" : h5::wrapped(title, width, "", "  ");
  s += matrix_text(records, world_, "bandwidth_Bps", 1e-9,
                   "  bandwidth (GB/s), " + format_bytes(static_cast<double>(p_.bandwidth_bytes)) +
                       " messages, the slower rank of each pair:",
                   width);
  s += matrix_text(records, world_, "latency_s", 1e6,
                   "  latency (us), " + format_bytes(static_cast<double>(p_.latency_bytes)) +
                       " messages, half the round trip, the slower rank of each pair:",
                   width);
  h5::TextTable t({{"shift"}, {"GB/s per rank"}});
  for (const auto& r : records)
    if (r.text("pattern") == "concurrent")
      t.row({h5::fixed(r.num("shift"), 0), h5::sig3(r.num("concurrent_bandwidth_Bps") / 1e9)});
  if (t.rows() > 0)
    s +=
        t.render("  concurrent: every rank r sends to r + shift at once, slowest rank:", {}, width);
  if (p_.bidirectional)
    s += "  bidirectional figures (sender < receiver): in the file and in --json\n";
  return s;
}

// Collective: world rank r's node, on every rank.
std::vector<int> gather_node_of(MPI_Comm world, int node_index, int world_size) {
  std::vector<int> node_of(static_cast<std::size_t>(world_size));
  RB_MPI_CHECK(MPI_Allgather(&node_index, 1, MPI_INT, node_of.data(), 1, MPI_INT, world));
  return node_of;
}

SweepOutcome P2pMatrix::run(RunContext& ctx, h5::Group& out) {
  prof::EngineSetup setup;
  setup.backend = ctx.backend;
  setup.world = ctx.world;
  setup.nccl_world = ctx.gpu ? &ctx.gpu->world_nccl() : nullptr;
  setup.bytes = static_cast<std::size_t>(std::max(p_.latency_bytes, p_.bandwidth_bytes));
  const std::unique_ptr<prof::Engine> link = prof::make_engine(setup);
  const Rounds rounds =
      measured_rounds(p_, gather_node_of(ctx.world, ctx.layout.node_index, world_));
  const std::vector<P2pPoint> points = points_of(rounds, world_, p_.concurrent);
  // Progress counts the plan's points, made for equal nodes; the real nodes can differ.
  const std::size_t planned = point_count();
  if (points.size() != planned)
    ctx.progress.note(
        "the ranks' nodes are not the plan's equal blocks: " + std::to_string(points.size()) +
        " points measured where the plan counted " + std::to_string(planned));
  const auto progress_index = [&](std::size_t i) {
    return points.size() == planned || planned == 0
               ? i
               : std::min(planned - 1, i * planned / points.size());
  };
  h5::PointsTable table = point_table(points);
  std::size_t pi = 0;
  bool stopped = false;  // a signal: the points before pi are kept (break: pi stays there)
  for (std::size_t r = 0; r < rounds.size(); pi += rounds[r].size(), ++r) {
    stopped = !ctx.progress.point_started(progress_index(pi),
                                          label(points[pi], rounds[r].size(), rounds.size()));
    if (stopped) break;
    measure_round(ctx, *link, rounds[r], pi, static_cast<int>(r), table);
  }
  for (; !stopped && pi < points.size(); ++pi) {
    stopped = !ctx.progress.point_started(progress_index(pi), label(points[pi], 0, rounds.size()));
    if (stopped) break;
    measure_shift(ctx, *link, points[pi], pi, table);
  }
  out.attr("transport", coll::transport_name(link->transport()));
  out.attr("latency_bytes", static_cast<std::int64_t>(p_.latency_bytes));
  out.attr("bandwidth_bytes", static_cast<std::int64_t>(p_.bandwidth_bytes));
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.attr("latency_iterations", p_.latency_iterations);
  out.attr("pairs", prof::to_string(p_.pairs));
  out.attr("seed", static_cast<std::int64_t>(p_.pairs.seed));
  out.attr("schedule", p_.rounds ? "rounds" : "serial");
  out.attr("rounds", static_cast<std::int64_t>(rounds.size()));
  std::vector<std::int64_t> shifts;
  if (p_.concurrent)
    for (int sh : shifts_of(world_)) shifts.push_back(sh);
  out.attr("shifts", shifts);
  table.keep_points(pi);
  table.write(out);
  report_results(ctx, table, screen_headlines(), [&](const auto& r) {
    return screen_tables(r, rounds.size(), ctx.progress.table_width());
  });
  return {};
}

}  // namespace

const std::vector<cfg::KeySpec>& p2p_matrix_keys() {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> keys = cfg::sweep_keys(
      "p2p_matrix",
      {bytes("latency_bytes", "8", 1, "message size of the latency measurements"),
       bytes("bandwidth_bytes", "4MiB", 1,
             "message size of the bandwidth measurements (host: < 2 GiB)")
           .on_cuda("256MiB"),
       integer("warmup", "5", 0, 1000000, "untimed repetitions before each measurement"),
       integer("iterations", "20", 1, 1000000, "messages per bandwidth measurement"),
       integer("latency_iterations", "100", 1, 10000000, "round trips per latency measurement"),
       flag("bidirectional", "true", "also measure both directions at once"),
       flag("concurrent", "true", "also measure the matrix under concurrent load"),
       other("pairs", "string", "by job size", "all|intra_node|node_leaders|per_node_pair|sample:N",
             "which ordered pairs"),
       integer("seed", "1", 0, INT64_MAX, "the draw of sample:N"),
       choice("schedule", "rounds", {"rounds", "serial"},
              "rounds: disjoint pairs at once; serial: one pair at a time")});
  return keys;
}

std::unique_ptr<Sweep> parse_p2p_matrix(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::KeyReader r(spec.node, p2p_matrix_keys(), ctx.backend);
  const cfg::Node& n = spec.node;
  P2pParams p;
  const bool host = ctx.backend == Backend::Host;
  p.latency_bytes = r.bytes("latency_bytes");
  p.bandwidth_bytes = r.bytes("bandwidth_bytes");
  if (host && (p.bandwidth_bytes > static_cast<std::uint64_t>(INT32_MAX) ||
               p.latency_bytes > static_cast<std::uint64_t>(INT32_MAX)))
    n.fail("bandwidth_bytes",
           "messages above 2 GiB - 1 do not fit MPI's int counts on the host path");
  p.warmup = r.integer("warmup");
  p.iterations = r.integer("iterations");
  p.latency_iterations = r.integer("latency_iterations");
  p.bidirectional = r.flag("bidirectional");
  p.concurrent = r.flag("concurrent");
  // Without `pairs:` the job's size decides (prof::default_pairs): every pair up to 64 ranks.
  p.pairs = prof::default_pairs(ctx.world_size, ctx.node_count);
  if (n.has("pairs")) {
    try {
      p.pairs = prof::parse_pair_spec(n.get_string("pairs", ""));
    } catch (const std::invalid_argument& e) {
      n.fail("pairs", e.what());
    }
  }
  p.pairs.seed = static_cast<std::uint64_t>(r.integer("seed"));
  // A seed with the default pairs is kept: the same file samples at 1,024 ranks and not at 8.
  if (n.has("seed") && n.has("pairs") && p.pairs.set != prof::PairSet::Sample)
    n.fail("seed", "draws the pairs of 'pairs: sample:N' only; this sweep measures pairs: " +
                       prof::to_string(p.pairs));
  p.rounds = r.choice("schedule") == "rounds";
  // One rank has no pairs and no shifts: the run writes a table of 0 points rather than
  // failing, so a config stays valid at every rank count.
  return std::make_unique<P2pMatrix>(p, ctx.world_size, ctx.node_count, host);
}

}  // namespace rb
