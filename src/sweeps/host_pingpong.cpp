#include "sweeps/host_pingpong.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace rb {
namespace {

struct PingpongParams {
  std::vector<std::int64_t> message_sizes;
  std::int64_t warmup = 5;
  std::int64_t iterations = 50;
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

class HostPingpong final : public Sweep {
 public:
  explicit HostPingpong(PingpongParams p) : p_(std::move(p)) {}
  std::string type() const override { return "host_pingpong"; }

  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    for (auto s : p_.message_sizes)
      lines.push_back("message size " + std::to_string(s) + " B, " +
                      std::to_string(p_.iterations) + " iterations per ring neighbour pair");
    return lines;
  }

  std::uint64_t estimated_output_bytes() const override {
    return 8ull * p_.message_sizes.size() * static_cast<std::uint64_t>(p_.iterations + 2) * 64;
  }

  SweepOutcome run(RunContext& ctx, h5::Group& out) override {
    const int rank = ctx.layout.rank, world = ctx.layout.world_size;
    const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    const std::size_t nsizes = p_.message_sizes.size();
    const std::size_t iters = static_cast<std::size_t>(p_.iterations);
    const auto max_size = *std::max_element(p_.message_sizes.begin(), p_.message_sizes.end());
    std::vector<char> send(static_cast<std::size_t>(max_size)), recv(send.size());
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<char>((i * 31 + rank) & 0x7f);

    // Rows of this rank as the pinging side of the pair (rank -> next).
    std::vector<double> one_way(nsizes * iters, 0.0);
    std::int64_t corrupt = 0;
    ProgressReporter& progress = ctx.progress;
    for (std::size_t si = 0; si < nsizes; ++si) {
      const int bytes = static_cast<int>(p_.message_sizes[si]);
      progress.point_started(si, "message size " + std::to_string(bytes) + " B");
      // One pair at a time so no link is shared with another measurement.
      for (int pinger = 0; pinger < world; ++pinger) {
        const int ponger = (pinger + 1) % world;
        MPI_Barrier(ctx.world);
        const bool ping = rank == pinger, pong = rank == ponger && !ping;
        const std::int64_t total = p_.warmup + p_.iterations;
        for (std::int64_t it = 0; it < total; ++it) {
          if (ping) {
            const auto t0 = std::chrono::steady_clock::now();
            if (world == 1) {
              RB_MPI_CHECK(MPI_Sendrecv(send.data(), bytes, MPI_CHAR, rank, 7, recv.data(), bytes,
                                        MPI_CHAR, rank, 7, ctx.world, MPI_STATUS_IGNORE));
            } else {
              RB_MPI_CHECK(MPI_Send(send.data(), bytes, MPI_CHAR, next, 7, ctx.world));
              RB_MPI_CHECK(MPI_Recv(recv.data(), bytes, MPI_CHAR, next, 8, ctx.world, MPI_STATUS_IGNORE));
            }
            const auto t1 = std::chrono::steady_clock::now();
            if (it >= p_.warmup)
              one_way[si * iters + static_cast<std::size_t>(it - p_.warmup)] =
                  0.5 * std::chrono::duration<double>(t1 - t0).count();
          } else if (pong) {
            RB_MPI_CHECK(MPI_Recv(recv.data(), bytes, MPI_CHAR, prev, 7, ctx.world, MPI_STATUS_IGNORE));
            RB_MPI_CHECK(MPI_Send(recv.data(), bytes, MPI_CHAR, prev, 8, ctx.world));
          }
        }
        // The echo must be the pinger's own pattern: a cheap end-to-end data check.
        if (ping && bytes > 0 && std::memcmp(send.data(), recv.data(), static_cast<std::size_t>(bytes)) != 0)
          ++corrupt;
      }
    }

    std::vector<double> median(nsizes), bandwidth(nsizes);
    for (std::size_t si = 0; si < nsizes; ++si) {
      std::vector<double> row(one_way.begin() + static_cast<std::ptrdiff_t>(si * iters),
                              one_way.begin() + static_cast<std::ptrdiff_t>((si + 1) * iters));
      median[si] = median_of(row);
      bandwidth[si] = median[si] > 0 ? static_cast<double>(p_.message_sizes[si]) / median[si] : 0.0;
    }
    out.attr("warmup", p_.warmup);
    out.attr("iterations", p_.iterations);
    out.attr("points", static_cast<std::int64_t>(nsizes));
    out.write_shared("message_size", p_.message_sizes, {nsizes},
                     {"B", "message size of each point"});
    out.write_per_rank("partner_rank", static_cast<std::int64_t>(next),
                       {"1", "the ring neighbour this rank pinged (rank + 1 mod world)"});
    out.write_per_rank("one_way_time", one_way, {nsizes, iters},
                       {"s", "half the round-trip time of each timed iteration, rank -> partner"});
    out.write_per_rank("median_one_way_time", median, {nsizes},
                       {"s", "median over iterations of one_way_time"});
    out.write_per_rank("bandwidth", bandwidth, {nsizes},
                       {"B/s", "message size / median one-way time"});
    out.write_per_rank("corrupt_echoes", corrupt,
                       {"1", "points where the echoed bytes differed from what was sent"});
    SweepOutcome outcome;
    if (corrupt > 0) {
      outcome.ok = false;
      outcome.failure = "rank " + std::to_string(rank) + ": " + std::to_string(corrupt) +
                        " message sizes echoed corrupted data";
    }
    return outcome;
  }

 private:
  PingpongParams p_;
};

}  // namespace

std::unique_ptr<Sweep> parse_host_pingpong(const SweepSpec& spec, const ParseContext&) {
  const cfg::Node& n = spec.node;
  n.allow_only({"type", "name", "message_sizes", "warmup", "iterations"});
  PingpongParams p;
  p.message_sizes = n.get_int_list("message_sizes", {8, 1024, 65536, 1048576}, 1, 1ll << 30);
  p.warmup = n.get_int("warmup", p.warmup, 0, 1000000);
  p.iterations = n.get_int("iterations", p.iterations, 1, 1000000);
  return std::make_unique<HostPingpong>(std::move(p));
}

}  // namespace rb
