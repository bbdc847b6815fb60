// The streamed reference (ring/head_reference.hpp): each rank generates its own block of a
// head (the inputs are counter-based, ring/inputs.hpp) and the blocks travel around the ring
// over MPI, as the K/V blocks of ring attention do, so no rank ever holds more than one block
// of two tensors: O(S/R) memory, and each rank generates S/R rows instead of S. The softmax of
// the sampled rows is accumulated online in double over the (branch, key) terms, which is
// the full reference's two-pass sum in another order.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "ring/head_reference.hpp"
#include "ring/inputs.hpp"
#include "runtime/mpi.hpp"

namespace rb::ring {
namespace {

// One rank's rows of two tensors (A, B) and two per-row values (x, y) as they travel:
// forward and dQ carry K, V; dK/dV carry Q, dO and the queries' lse and delta.
struct Block {
  std::vector<float> a, b;
  std::vector<double> x, y;
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((a.capacity() + b.capacity()) * sizeof(float) +
                                     (x.capacity() + y.capacity()) * sizeof(double));
  }
};

// The block moves one neighbour on in place, in pieces of 4 MiB: MPI_Sendrecv_replace's own
// buffer stays small, so a rank holds one block, not two (and MPI counts are ints).
template <class T>
void shift(std::vector<T>& block, MPI_Datatype type, int to, int from, MPI_Comm comm) {
  constexpr std::size_t kPiece = (std::size_t{4} << 20) / sizeof(T);
  for (std::size_t off = 0; off < block.size(); off += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, block.size() - off));
    RB_MPI_CHECK(MPI_Sendrecv_replace(block.data() + off, n, type, to, 71, from, 71, comm,
                                      MPI_STATUS_IGNORE));
  }
}

class StreamedReference final : public RankReference {
 public:
  StreamedReference(const Problem& p, std::uint64_t seed, int ring_rank, MPI_Comm ring_comm)
      : RankReference(p, ring_rank, ring_comm),
        seed_(seed),
        patterns_(p.patterns()),
        scale_(1.0 / std::sqrt(static_cast<double>(p.head_dim))) {}

  void load_head(int b, int h) override {
    batch_ = b;
    head_ = h;
  }

  void forward(const std::vector<std::int64_t>& rows, std::vector<double>& out,
               std::vector<double>& lse) override {
    const std::vector<float> q = local_rows(Tensor::Q, rows);
    const std::size_t m = rows.size();
    std::vector<double> mx(m, -std::numeric_limits<double>::infinity()), l(m, 0.0);
    out.assign(m * d_, 0.0);
    start(Tensor::K, Tensor::V);
    around_ring([&](const Block& blk, const std::vector<std::int64_t>& kpos) {
      each_pair(rows, kpos, [&](std::size_t i, std::size_t j, int w) {
        double* acc = &out[i * d_];
        const double s = dot(&q[i * d_], &blk.a[j * d_]) * scale_;
        if (s > mx[i]) {  // online softmax: rescale what was summed under the old maximum
          const double r = std::exp(mx[i] - s);
          l[i] *= r;
          for (std::size_t c = 0; c < d_; ++c) acc[c] *= r;
          mx[i] = s;
        }
        const double e = w * std::exp(s - mx[i]);
        l[i] += e;
        const float* v = &blk.b[j * d_];
        for (std::size_t c = 0; c < d_; ++c) acc[c] += e * v[c];
      });
    });
    lse.assign(m, -std::numeric_limits<double>::infinity());
    for (std::size_t i = 0; i < m; ++i) {
      if (l[i] == 0.0) continue;  // no key: out stays 0
      for (std::size_t c = 0; c < d_; ++c) out[i * d_ + c] /= l[i];
      lse[i] = mx[i] + std::log(l[i]);
    }
  }

  double delta(std::int64_t row, const double* o) const override {
    std::vector<float>& g = row_;
    g.resize(d_);
    input_row(seed_, Tensor::dO, p_.dtype, batch_, head_, at(row), p_.head_dim, g.data());
    double s = 0.0;
    for (std::size_t c = 0; c < d_; ++c) s += g[c] * o[c];
    return s;
  }

  void dq(const std::vector<std::int64_t>& rows, const std::vector<double>& lse,
          const std::vector<double>& delta, std::vector<double>& dq) override {
    const std::vector<float> q = local_rows(Tensor::Q, rows), g = local_rows(Tensor::dO, rows);
    dq.assign(rows.size() * d_, 0.0);
    start(Tensor::K, Tensor::V);
    around_ring([&](const Block& blk, const std::vector<std::int64_t>& kpos) {
      each_pair(rows, kpos, [&](std::size_t i, std::size_t j, int w) {
        const float* k = &blk.a[j * d_];
        const double P = std::exp(dot(&q[i * d_], k) * scale_ - lse[i]);
        const double ds = w * P * (dot(&g[i * d_], &blk.b[j * d_]) - delta[i]) * scale_;
        for (std::size_t c = 0; c < d_; ++c) dq[i * d_ + c] += ds * k[c];
      });
    });
  }

  void dkv(const std::vector<std::int64_t>& rows, const std::vector<double>& lse_local,
           const std::vector<double>& delta_local, std::vector<double>& dk,
           std::vector<double>& dv) override {
    const std::vector<float> k = local_rows(Tensor::K, rows), v = local_rows(Tensor::V, rows);
    dk.assign(rows.size() * d_, 0.0);
    dv.assign(rows.size() * d_, 0.0);
    start(Tensor::Q, Tensor::dO);
    cur_.x = lse_local;
    cur_.y = delta_local;
    around_ring([&](const Block& blk, const std::vector<std::int64_t>& qpos) {
      // Here the local rows are keys and the visiting block's rows queries.
      each_pair(
          rows, qpos,
          [&](std::size_t i, std::size_t j, int w) {
            const float* q = &blk.a[j * d_];
            const float* g = &blk.b[j * d_];
            const double P = w * std::exp(dot(q, &k[i * d_]) * scale_ - blk.x[j]);
            const double ds = P * (dot(g, &v[i * d_]) - blk.y[j]) * scale_;
            for (std::size_t c = 0; c < d_; ++c) {
              dv[i * d_ + c] += P * g[c];
              dk[i * d_ + c] += ds * q[c];
            }
          },
          true);
    });
  }

 private:
  // f(i, j, terms) for every local row i of `rows` and visiting row j with terms > 0, in
  // tiles of local rows so that a visiting row is read from memory once per tile, not once
  // per local row (the block is far larger than the cache; the tile's rows are not).
  // local_is_key: the local rows are keys (dK/dV), else queries.
  template <class F>
  void each_pair(const std::vector<std::int64_t>& rows, const std::vector<std::int64_t>& visiting,
                 F f, bool local_is_key = false) const {
    constexpr std::size_t kTile = 32;
    for (std::size_t i0 = 0; i0 < rows.size(); i0 += kTile) {
      const std::size_t i1 = std::min(rows.size(), i0 + kTile);
      for (std::size_t j = 0; j < visiting.size(); ++j)
        for (std::size_t i = i0; i < i1; ++i) {
          const std::int64_t mine = at(rows[i]);
          const int w = local_is_key ? terms(visiting[j], mine) : terms(mine, visiting[j]);
          if (w != 0) f(i, j, w);
        }
    }
  }
  // The (branch, key) terms of query position qp and key position kp: a key two branches
  // allow counts twice in LongNet's merged softmax, as in the full reference.
  int terms(std::int64_t qp, std::int64_t kp) const {
    int w = 0;
    for (const attn::Pattern& pat : patterns_) w += pat.allows(qp, kp, head_) ? 1 : 0;
    return w;
  }
  // Four partial sums: a strict-order double sum does not vectorise and is latency-bound;
  // this order is as exact (to 1e-16) and several times faster.
  double dot(const float* a, const float* b) const {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    std::size_t c = 0;
    for (; c + 4 <= d_; c += 4) {
      s0 += static_cast<double>(a[c]) * b[c];
      s1 += static_cast<double>(a[c + 1]) * b[c + 1];
      s2 += static_cast<double>(a[c + 2]) * b[c + 2];
      s3 += static_cast<double>(a[c + 3]) * b[c + 3];
    }
    for (; c < d_; ++c) s0 += static_cast<double>(a[c]) * b[c];
    return (s0 + s1) + (s2 + s3);
  }
  // The input head of tensor t that query head head_ reads: K and V are shared by a group (GQA).
  int input_head(Tensor t) const {
    return t == Tensor::K || t == Tensor::V ? head_ / p_.group() : head_;
  }
  // Tensor t at some global positions, generated (positions x d floats).
  std::vector<float> generate(Tensor t, const std::vector<std::int64_t>& positions) const {
    std::vector<float> out(positions.size() * d_);
    for (std::size_t i = 0; i < positions.size(); ++i)
      input_row(seed_, t, p_.dtype, batch_, input_head(t), positions[i], p_.head_dim, &out[i * d_]);
    return out;
  }
  // Tensor t of some local rows.
  std::vector<float> local_rows(Tensor t, const std::vector<std::int64_t>& rows) const {
    std::vector<std::int64_t> positions(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) positions[i] = at(rows[i]);
    return generate(t, positions);
  }
  // This rank's block of tensors a and b, as the first to visit.
  void start(Tensor a, Tensor b) {
    cur_.a = generate(a, pos_);
    cur_.b = generate(b, pos_);
    cur_.x.clear();
    cur_.y.clear();
  }
  // visit(block, its global positions) for every rank's block, own first, then the blocks of
  // ranks r-1, r-2, ... (the order of ring attention's K/V steps, kv_owner).
  template <class Visit>
  void around_ring(Visit visit) {
    const int R = p_.ring_size, to = (rank_ + 1) % R, from = (rank_ + R - 1) % R;
    for (int s = 0; s < R; ++s) {
      visit(static_cast<const Block&>(cur_), local_positions(p_, kv_owner(rank_, s, R)));
      if (s + 1 == R) break;
      shift(cur_.a, MPI_FLOAT, to, from, comm_);
      shift(cur_.b, MPI_FLOAT, to, from, comm_);
      shift(cur_.x, MPI_DOUBLE, to, from, comm_);
      shift(cur_.y, MPI_DOUBLE, to, from, comm_);
    }
    note_peak();
  }
  // The block, this rank's positions and the visiting block's.
  void note_peak() {
    const auto positions = static_cast<std::int64_t>(2 * pos_.size() * sizeof(std::int64_t));
    peak_ = std::max(peak_, cur_.bytes() + positions);
  }

  std::uint64_t seed_;
  std::vector<attn::Pattern> patterns_;
  double scale_;
  int batch_ = 0, head_ = 0;
  Block cur_;
  mutable std::vector<float> row_;  // delta()'s dO row
};

}  // namespace

std::unique_ptr<HeadReference> make_streamed_reference(const Problem& p, std::uint64_t seed,
                                                       int ring_rank, MPI_Comm ring_comm) {
  return std::make_unique<StreamedReference>(p, seed, ring_rank, ring_comm);
}

}  // namespace rb::ring
