#include "sweeps/host_pingpong.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
#include <utility>

#include "config/bytes.hpp"
#include "metrics/stats.hpp"
#include "metrics/table.hpp"
#include "profiling/timing.hpp"
#include "runtime/mpi_util.hpp"

namespace rb {
namespace {

struct PingpongParams {
  std::vector<std::int64_t> message_sizes;
  std::int64_t warmup = 0;  // as parsed: a key left out is its default in host_pingpong_keys()
  std::int64_t iterations = 0;
  int world_size = 1;  // every rank pings its neighbour in turn
};

class HostPingpong final : public Sweep {
 public:
  explicit HostPingpong(PingpongParams p) : p_(std::move(p)) {}
  std::string type() const override { return "host_pingpong"; }
  std::size_t point_count() const override { return p_.message_sizes.size(); }
  std::string iterations_text() const override {
    return rb::iterations_text(p_.iterations, p_.warmup);
  }
  // Each rank in turn: round trips of two latencies and twice the size at the link rate.
  double estimated_seconds(const CostAssumptions& a) const override {
    double total = 0;
    for (auto s : p_.message_sizes)
      total += a.light_point_s + static_cast<double>(p_.world_size) *
                                     static_cast<double>(p_.iterations + p_.warmup) * 2 *
                                     (a.latency_s + static_cast<double>(s) / a.link_Bps);
    return total;
  }

  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    for (auto s : p_.message_sizes)
      lines.push_back("message size " + format_bytes(static_cast<double>(s)) + ", " +
                      std::to_string(p_.iterations) + " iterations per ring neighbour pair");
    return lines;
  }

  // The table as write() lays it out (every dataset counted).
  std::uint64_t estimated_output_bytes() const override {
    return point_table().planned_bytes(static_cast<std::size_t>(p_.world_size));
  }

  SweepOutcome run(RunContext& ctx, h5::Group& out) override {
    const int rank = ctx.layout.rank, world = ctx.layout.world_size;
    const int next = (rank + 1) % world;
    const auto max_size = *std::max_element(p_.message_sizes.begin(), p_.message_sizes.end());
    Buffers buf(static_cast<std::size_t>(max_size), rank);
    h5::PointsTable table = point_table();
    std::int64_t corrupt = 0;
    std::size_t si = 0;
    for (; si < p_.message_sizes.size(); ++si) {
      const int bytes = static_cast<int>(p_.message_sizes[si]);
      // A signal: the points before are kept.
      if (!ctx.progress.point_started(si, "message size " + format_bytes(bytes))) break;
      // One pair at a time so no link is shared with another measurement.
      std::vector<double> one_way;
      bool bad = false;
      for (int pinger = 0; pinger < world; ++pinger) {
        MPI_Barrier(ctx.world);
        if (rank == pinger) {
          one_way = ping(ctx.world, buf, bytes, next);
          // The echo must be the pinger's own pattern: a cheap end-to-end data check.
          bad = std::memcmp(buf.send.data(), buf.recv.data(), static_cast<std::size_t>(bytes)) != 0;
        } else if (rank == (pinger + 1) % world) {
          pong(ctx.world, buf, bytes, pinger);
        }
      }
      corrupt += bad ? 1 : 0;
      const double median = stats::median(one_way);
      table.set("one_way_time_s", si, one_way);
      table.set("bandwidth_Bps", si, median > 0 ? static_cast<double>(bytes) / median : 0.0);
      table.set_int("partner_rank", si, next);
      table.set_int("corrupt_echo", si, bad ? 1 : 0);
    }
    out.attr("warmup", p_.warmup);
    out.attr("iterations", p_.iterations);
    table.keep_points(si);
    table.write(out);
    report_results(ctx, table, headlines(),
                   [&](const auto& r) { return screen_table(r, ctx.progress.table_width()); });
    SweepOutcome outcome;
    if (corrupt > 0) {
      outcome.ok = false;
      outcome.failure = "rank " + std::to_string(rank) + ": " + std::to_string(corrupt) +
                        " message sizes echoed corrupted data";
    }
    return outcome;
  }

 private:
  struct Buffers {
    Buffers(std::size_t bytes, int rank) : send(bytes), recv(bytes) {
      for (std::size_t i = 0; i < send.size(); ++i)
        send[i] = static_cast<char>((i * 31 + rank) & 0x7f);
    }
    std::vector<char> send, recv;
  };

  static std::vector<h5::Headline> headlines() {
    using h5::OverInner, h5::OverRanks;
    return {{"one_way_time_s", OverInner::Median, OverRanks::Max},
            {"bandwidth_Bps", OverInner::None, OverRanks::Min},
            {"corrupt_echo", OverInner::None, OverRanks::Sum},
            {"one_way_time_s", OverInner::Cv, OverRanks::Slowest}};
  }

  std::string screen_table(const std::vector<h5::PointRecord>& records, std::size_t width) const {
    h5::TextTable t(
        {{"size", "(B)"}, {"one-way", "(us)"}, {"bandwidth", "(GB/s)"}, {"corrupt", "(echoes)"}});
    for (const auto& r : records)
      t.row({h5::fixed(r.num("message_size_bytes"), 0), h5::fixed(r.num("one_way_time_s") * 1e6, 2),
             h5::sig3(r.num("bandwidth_Bps") / 1e9), h5::fixed(r.num("corrupt_echo"), 0)});
    return t.render(
        results_title(*this) + " MPI ping-pong, each rank with rank + 1, one pair at a time",
        {"one-way: half the round trip, median over iterations, slowest rank; "
         "bandwidth: size / that rank's median, slowest rank"},
        width);
  }

  h5::PointsTable point_table() const {
    h5::PointsTable t(p_.message_sizes.size());
    t.key("message_size_bytes", p_.message_sizes, {"B", "message size of the point"});
    t.metric("one_way_time_s",
             {"s", "half the round-trip time of each timed iteration, rank -> partner"},
             {static_cast<std::uint64_t>(p_.iterations)}, {"iteration"});
    t.metric("bandwidth_Bps", {"B/s", "message size / median one-way time"});
    t.int_metric("partner_rank", {"1", "the ring neighbour this rank pinged (rank + 1 mod world)"});
    t.int_metric("corrupt_echo",
                 {"1", "1 when the echoed bytes differed from what this rank sent"});
    h5::Judging j;
    j.headline = {"bandwidth_Bps", "one_way_time_s"};
    j.noise = "p2p_bandwidth";
    j.noise_of = {{"one_way_time_s", "latency"}};
    j.iteration_times = "one_way_time_s";
    j.message_size_key = "message_size_bytes";
    t.judging(std::move(j));
    return t;
  }

  // This rank pings `partner` (itself when alone): half of each timed round trip.
  std::vector<double> ping(MPI_Comm world, Buffers& b, int bytes, int partner) const {
    std::vector<double> one_way;
    for (std::int64_t it = 0; it < p_.warmup + p_.iterations; ++it) {
      const double t0 = prof::now_s();
      if (partner == mpi::rank_of(world)) {
        RB_MPI_CHECK(MPI_Sendrecv(b.send.data(), bytes, MPI_CHAR, partner, 7, b.recv.data(), bytes,
                                  MPI_CHAR, partner, 7, world, MPI_STATUS_IGNORE));
      } else {
        RB_MPI_CHECK(MPI_Send(b.send.data(), bytes, MPI_CHAR, partner, 7, world));
        RB_MPI_CHECK(
            MPI_Recv(b.recv.data(), bytes, MPI_CHAR, partner, 8, world, MPI_STATUS_IGNORE));
      }
      if (it >= p_.warmup) one_way.push_back(0.5 * (prof::now_s() - t0));
    }
    return one_way;
  }

  // This rank echoes every message of `pinger` back.
  void pong(MPI_Comm world, Buffers& b, int bytes, int pinger) const {
    for (std::int64_t it = 0; it < p_.warmup + p_.iterations; ++it) {
      RB_MPI_CHECK(MPI_Recv(b.recv.data(), bytes, MPI_CHAR, pinger, 7, world, MPI_STATUS_IGNORE));
      RB_MPI_CHECK(MPI_Send(b.recv.data(), bytes, MPI_CHAR, pinger, 8, world));
    }
  }

  PingpongParams p_;
};

}  // namespace

const std::vector<cfg::KeySpec>& host_pingpong_keys() {
  using namespace cfg::key;
  static const std::vector<cfg::KeySpec> keys = cfg::sweep_keys(
      "host_pingpong",
      {integer("message_sizes", "[8, 1024, 65536, 1048576]", 1, 1ll << 30, "bytes per message")
           .or_list(),
       integer("warmup", "5", 0, 1000000, "untimed round trips per pair and size"),
       integer("iterations", "50", 1, 1000000, "timed round trips per pair and size")});
  return keys;
}

std::unique_ptr<Sweep> parse_host_pingpong(const SweepSpec& spec, const ParseContext& ctx) {
  const cfg::KeyReader r(spec.node, host_pingpong_keys(), ctx.backend);
  // Braces read the keys in order, so the first bad one is the one reported.
  return std::make_unique<HostPingpong>(PingpongParams{
      r.integers("message_sizes"), r.integer("warmup"), r.integer("iterations"), ctx.world_size});
}

}  // namespace rb
