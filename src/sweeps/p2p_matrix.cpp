#include "sweeps/p2p_matrix.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "profiling/timing.hpp"

#ifdef RINGBENCH_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda/profiling/profiling_cuda.hpp"
#include "runtime/cuda_check.hpp"
#endif

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

// Point-to-point messages over NCCL (enqueued on a stream, completed by a stream sync) or MPI
// (non-blocking, completed by MPI_Waitall). post() adds to the current batch; sends and
// receives posted between begin() and end() form one NCCL group (so they progress together).
class Link {
 public:
  Link(RunContext& ctx, std::size_t bytes) : world_(ctx.world) {
    nccl_ = ctx.backend == Backend::Cuda;
    if (!nccl_) {
      send_ = prof::HostBuffer(bytes);
      recv_ = prof::HostBuffer(bytes);
      std::memset(send_.get(), 1, bytes);
      return;
    }
#ifdef RINGBENCH_HAVE_CUDA
    if (!ctx.gpu) throw std::runtime_error("p2p_matrix: the cuda backend has no GPU context");
    dsend_ = prof::cuda::DeviceBuffer(bytes);
    drecv_ = prof::cuda::DeviceBuffer(bytes);
    stream_ = std::make_unique<prof::cuda::Stream>();
    prof::cuda::fill_zero(dsend_.get(), bytes, stream_->get());
    stream_->synchronize();
    comm_ = ctx.gpu->world.raw();
#else
    throw std::runtime_error("p2p_matrix: the cuda backend needs a build with CUDA and NCCL");
#endif
  }
  bool nccl() const { return nccl_; }
  void* send_buf() const {
#ifdef RINGBENCH_HAVE_CUDA
    if (nccl_) return dsend_.get();
#endif
    return send_.get();
  }
  void* recv_buf() const {
#ifdef RINGBENCH_HAVE_CUDA
    if (nccl_) return drecv_.get();
#endif
    return recv_.get();
  }

  void begin() {
#ifdef RINGBENCH_HAVE_CUDA
    if (nccl_) RB_NCCL_CHECK(ncclGroupStart());
#endif
  }
  void send(std::size_t bytes, int peer) {
#ifdef RINGBENCH_HAVE_CUDA
    if (nccl_) {
      RB_NCCL_CHECK(ncclSend(send_buf(), bytes, ncclChar, peer, comm(), stream()));
      return;
    }
#endif
    reqs_.emplace_back();
    RB_MPI_CHECK(MPI_Isend(send_buf(), static_cast<int>(bytes), MPI_BYTE, peer, 17, world_, &reqs_.back()));
  }
  void recv(std::size_t bytes, int peer) {
#ifdef RINGBENCH_HAVE_CUDA
    if (nccl_) {
      RB_NCCL_CHECK(ncclRecv(recv_buf(), bytes, ncclChar, peer, comm(), stream()));
      return;
    }
#endif
    reqs_.emplace_back();
    RB_MPI_CHECK(MPI_Irecv(recv_buf(), static_cast<int>(bytes), MPI_BYTE, peer, 17, world_, &reqs_.back()));
  }
  void end() {
#ifdef RINGBENCH_HAVE_CUDA
    if (nccl_) RB_NCCL_CHECK(ncclGroupEnd());
#endif
  }
  // Waits for everything posted so far.
  void complete() {
#ifdef RINGBENCH_HAVE_CUDA
    if (nccl_) {
      stream_->synchronize();
      return;
    }
#endif
    if (!reqs_.empty())
      RB_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
    reqs_.clear();
  }
  // Ping-pong steps must finish before the next on MPI; NCCL orders them on the stream.
  void step_done() {
    if (!nccl_) complete();
  }

 private:
#ifdef RINGBENCH_HAVE_CUDA
  ncclComm_t comm() const { return static_cast<ncclComm_t>(comm_); }
  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_->get()); }
  prof::cuda::DeviceBuffer dsend_, drecv_;
  std::unique_ptr<prof::cuda::Stream> stream_;
  void* comm_ = nullptr;
#endif
  MPI_Comm world_;
  bool nccl_ = false;
  prof::HostBuffer send_, recv_;
  std::vector<MPI_Request> reqs_;
};

class P2pMatrix final : public Sweep {
 public:
  P2pMatrix(P2pParams p, int world) : p_(p), world_(world) {}
  std::string type() const override { return "p2p_matrix"; }

  std::vector<std::string> plan() const override {
    std::vector<std::string> lines;
    for (int a = 0; a < world_; ++a)
      for (int b = 0; b < world_; ++b)
        if (a != b) lines.push_back(pair_label(a, b));
    if (p_.concurrent)
      for (int s = 1; s < world_; ++s) lines.push_back(shift_label(s));
    return lines;
  }
  std::uint64_t estimated_output_bytes() const override {
    return 6u * 8u * static_cast<std::uint64_t>(world_) * static_cast<std::uint64_t>(world_) + 4096;
  }
  SweepOutcome run(RunContext& ctx, h5::Group& out) override;

 private:
  std::string pair_label(int a, int b) const {
    return "pair " + std::to_string(a) + " -> " + std::to_string(b) + ": latency " +
           std::to_string(p_.latency_bytes) + " B, bandwidth " + std::to_string(p_.bandwidth_bytes) +
           " B" + (p_.bidirectional && a < b ? ", one way and both ways" : ", one way");
  }
  std::string shift_label(int s) const {
    return "concurrent: every rank r -> r+" + std::to_string(s) + ", " +
           std::to_string(p_.bandwidth_bytes) + " B";
  }
  P2pParams p_;
  int world_;
};

// Seconds from a world barrier to this rank's completion of `body`; the max over the world
// (ranks not taking part contribute 0), so the slowest side of the pair sets the time.
template <class F>
double timed_max(MPI_Comm world, F&& body) {
  RB_MPI_CHECK(MPI_Barrier(world));
  const double t0 = prof::now_s();
  body();
  return prof::allreduce_double(prof::now_s() - t0, MPI_MAX, world);
}

SweepOutcome P2pMatrix::run(RunContext& ctx, h5::Group& out) {
  const int W = world_, me = ctx.layout.rank;
  const std::size_t lat = static_cast<std::size_t>(p_.latency_bytes);
  const std::size_t bw = static_cast<std::size_t>(p_.bandwidth_bytes);
  Link link(ctx, std::max(lat, bw));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::size_t WW = static_cast<std::size_t>(W) * static_cast<std::size_t>(W);
  std::vector<double> latency(WW, nan), latency_bi(WW, nan), bandwidth(WW, nan),
      bandwidth_bi(WW, nan), concurrent(WW, nan);
  auto at = [W](int a, int b) { return static_cast<std::size_t>(a) * static_cast<std::size_t>(W) + static_cast<std::size_t>(b); };

  ProgressReporter& progress = ctx.progress;
  std::size_t point = 0;
  for (int a = 0; a < W; ++a) {
    for (int b = 0; b < W; ++b) {
      if (a == b) continue;
      progress.point_started(point++, pair_label(a, b));
      const bool is_a = me == a, is_b = me == b;
      const int peer = is_a ? b : a;
      // Ping-pong: a sends, b answers; one-way latency = round trip / 2.
      auto pingpong = [&](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) {
          if (is_a) {
            link.begin(); link.send(lat, peer); link.end(); link.step_done();
            link.begin(); link.recv(lat, peer); link.end(); link.step_done();
          } else if (is_b) {
            link.begin(); link.recv(lat, peer); link.end(); link.step_done();
            link.begin(); link.send(lat, peer); link.end(); link.step_done();
          }
        }
        link.complete();
      };
      pingpong(p_.warmup);
      latency[at(a, b)] =
          timed_max(ctx.world, [&] { pingpong(p_.latency_iterations); }) / (2.0 * static_cast<double>(p_.latency_iterations));

      // One way: a streams `iterations` messages to b, all in flight at once (a window).
      auto stream_one_way = [&](std::int64_t n) {
        if (is_a || is_b) {
          for (std::int64_t i = 0; i < n; ++i) {
            link.begin();
            if (is_a) link.send(bw, peer); else link.recv(bw, peer);
            link.end();
          }
        }
        link.complete();
      };
      stream_one_way(p_.warmup);
      const double t_uni = timed_max(ctx.world, [&] { stream_one_way(p_.iterations); });
      bandwidth[at(a, b)] = static_cast<double>(bw) * static_cast<double>(p_.iterations) / t_uni;

      if (p_.bidirectional && a < b) {
        auto exchange = [&](std::size_t bytes, std::int64_t n, bool each_step) {
          if (is_a || is_b) {
            for (std::int64_t i = 0; i < n; ++i) {
              link.begin(); link.send(bytes, peer); link.recv(bytes, peer); link.end();
              if (each_step) link.step_done();
            }
          }
          link.complete();
        };
        exchange(lat, p_.warmup, true);
        const double t_lat = timed_max(ctx.world, [&] { exchange(lat, p_.latency_iterations, true); });
        latency_bi[at(a, b)] = latency_bi[at(b, a)] = t_lat / static_cast<double>(p_.latency_iterations);
        exchange(bw, p_.warmup, false);
        const double t_bi = timed_max(ctx.world, [&] { exchange(bw, p_.iterations, false); });
        // Both directions' bytes: the total the pair moved per second.
        bandwidth_bi[at(a, b)] = bandwidth_bi[at(b, a)] =
            2.0 * static_cast<double>(bw) * static_cast<double>(p_.iterations) / t_bi;
      }
    }
  }

  if (p_.concurrent) {
    for (int s = 1; s < W; ++s) {
      progress.point_started(point++, shift_label(s));
      const int to = (me + s) % W, from = (me - s + W) % W;
      auto shifted = [&](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) {
          link.begin(); link.send(bw, to); link.recv(bw, from); link.end();
        }
        link.complete();
      };
      shifted(p_.warmup);
      RB_MPI_CHECK(MPI_Barrier(ctx.world));
      const double t0 = prof::now_s();
      shifted(p_.iterations);
      const double mine = prof::now_s() - t0;
      std::vector<double> all(static_cast<std::size_t>(W));
      RB_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, ctx.world));
      for (int r = 0; r < W; ++r) {
        const int dst = (r + s) % W;
        const double t = std::max(all[static_cast<std::size_t>(r)], all[static_cast<std::size_t>(dst)]);
        concurrent[at(r, dst)] = static_cast<double>(bw) * static_cast<double>(p_.iterations) / t;
      }
    }
  }

  const std::vector<std::uint64_t> dims = {static_cast<std::uint64_t>(W), static_cast<std::uint64_t>(W)};
  out.attr("transport", link.nccl() ? "nccl" : "mpi");
  out.attr("latency_bytes", static_cast<std::int64_t>(p_.latency_bytes));
  out.attr("bandwidth_bytes", static_cast<std::int64_t>(p_.bandwidth_bytes));
  out.attr("warmup", p_.warmup);
  out.attr("iterations", p_.iterations);
  out.attr("latency_iterations", p_.latency_iterations);
  out.attr("layout", "[sender, receiver]; diagonal and unmeasured entries are NaN");
  out.write_shared("latency_s", latency, dims, {"s", "one-way latency of latency_bytes messages: ping-pong round trip / 2, [sender, receiver]"});
  out.write_shared("latency_bidir_s", latency_bi, dims, {"s", "time per exchange when both ranks send latency_bytes to each other at once (symmetric)"});
  out.write_shared("bandwidth_Bps", bandwidth, dims, {"B/s", "one-way bandwidth of bandwidth_bytes messages, iterations in flight, [sender, receiver]"});
  out.write_shared("bandwidth_bidir_Bps", bandwidth_bi, dims, {"B/s", "both directions at once: bytes moved by the pair (both ways) per second (symmetric)"});
  out.write_shared("concurrent_bandwidth_Bps", concurrent, dims, {"B/s", "one-way bandwidth [sender, receiver] while every rank r sent to r+s at once (s = receiver - sender mod world)"});
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
