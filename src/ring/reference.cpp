#include "ring/reference.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "ring/head_reference.hpp"
#include "ring/inputs.hpp"
#include "runtime/mpi.hpp"

namespace rb::ring {

Reference::Reference(const Problem& p, std::uint64_t seed)
    : p_(p), seed_(seed), patterns_(p.patterns()) {}

void Reference::load_head(int b, int h) {
  head_ = h;
  const std::int64_t S = p_.seq_len, d = p_.head_dim;
  auto fill = [&](std::vector<float>& t, Tensor which) {
    // K and V of query head h: its group's K/V head (grouped-query attention).
    const int head = which == Tensor::K || which == Tensor::V ? h / p_.group() : h;
    t.resize(static_cast<std::size_t>(S * d));
    for (std::int64_t pos = 0; pos < S; ++pos)
      for (int c = 0; c < d; ++c)
        t[static_cast<std::size_t>(pos * d + c)] =
            input_value(seed_, which, p_.dtype, b, head, pos, c);
  };
  fill(q_, Tensor::Q);
  fill(k_, Tensor::K);
  fill(v_, Tensor::V);
  fill(do_, Tensor::dO);
}

double Reference::score(std::int64_t qp, std::int64_t kp) const {
  const float* q = row(q_, qp);
  const float* k = row(k_, kp);
  double s = 0.0;
  for (int c = 0; c < p_.head_dim; ++c) s += static_cast<double>(q[c]) * k[c];
  return s / std::sqrt(static_cast<double>(p_.head_dim));
}

void Reference::forward_row(std::int64_t p, double* out, double* lse) const {
  const int d = p_.head_dim;
  std::fill(out, out + d, 0.0);
  // Two passes (max, then sum) over every (branch, key) term: the softmax over the union of
  // all branches' keys is LongNet's denominator-weighted combination.
  double m = -std::numeric_limits<double>::infinity();
  for (const attn::Pattern& pat : patterns_)
    for (std::int64_t k = 0; k < p_.seq_len; ++k)
      if (pat.allows(p, k, head_)) m = std::max(m, score(p, k));
  if (m == -std::numeric_limits<double>::infinity()) {
    *lse = m;
    return;
  }
  double l = 0.0;
  for (const attn::Pattern& pat : patterns_)
    for (std::int64_t k = 0; k < p_.seq_len; ++k)
      if (pat.allows(p, k, head_)) {
        const double e = std::exp(score(p, k) - m);
        l += e;
        const float* v = row(v_, k);
        for (int c = 0; c < d; ++c) out[c] += e * v[c];
      }
  for (int c = 0; c < d; ++c) out[c] /= l;
  *lse = m + std::log(l);
}

double Reference::delta(std::int64_t p, const double* out) const {
  const float* g = row(do_, p);
  double s = 0.0;
  for (int c = 0; c < p_.head_dim; ++c) s += g[c] * out[c];
  return s;
}

void Reference::dq_row(std::int64_t p, double lse, double delta, double* dq) const {
  const int d = p_.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::fill(dq, dq + d, 0.0);
  const float* g = row(do_, p);
  for (const attn::Pattern& pat : patterns_)
    for (std::int64_t k = 0; k < p_.seq_len; ++k) {
      if (!pat.allows(p, k, head_)) continue;
      const double P = std::exp(score(p, k) - lse);
      const float* v = row(v_, k);
      double dp = 0.0;
      for (int c = 0; c < d; ++c) dp += static_cast<double>(g[c]) * v[c];
      const double ds = P * (dp - delta) * scale;
      const float* kk = row(k_, k);
      for (int c = 0; c < d; ++c) dq[c] += ds * kk[c];
    }
}

void Reference::dkv_row(std::int64_t k, const std::vector<double>& lse,
                        const std::vector<double>& delta, double* dk, double* dv) const {
  const int d = p_.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::fill(dk, dk + d, 0.0);
  std::fill(dv, dv + d, 0.0);
  const float* v = row(v_, k);
  for (const attn::Pattern& pat : patterns_)
    for (std::int64_t p = 0; p < p_.seq_len; ++p) {
      if (!pat.allows(p, k, head_)) continue;
      const std::size_t pi = static_cast<std::size_t>(p);
      const double P = std::exp(score(p, k) - lse[pi]);
      const float* g = row(do_, p);
      double dp = 0.0;
      for (int c = 0; c < d; ++c) dp += static_cast<double>(g[c]) * v[c];
      const double ds = P * (dp - delta[pi]) * scale;
      const float* q = row(q_, p);
      for (int c = 0; c < d; ++c) {
        dv[c] += P * g[c];
        dk[c] += ds * q[c];
      }
    }
}

namespace {

// The full-sequence reference behind the parity check's interface. dK/dV need the normaliser
// of every query of the sequence: the ring gathers every rank's (O(S) per rank, as the head).
class FullReference final : public RankReference {
 public:
  FullReference(const Problem& p, std::uint64_t seed, int ring_rank, MPI_Comm ring_comm)
      : RankReference(p, ring_rank, ring_comm), ref_(p, seed) {}

  void load_head(int b, int h) override {
    ref_.load_head(b, h);
    peak_ = std::max(peak_, ref_.bytes());
  }
  void forward(const std::vector<std::int64_t>& rows, std::vector<double>& out,
               std::vector<double>& lse) override {
    out.assign(rows.size() * d_, 0.0);
    lse.assign(rows.size(), 0.0);
    for (std::size_t i = 0; i < rows.size(); ++i)
      ref_.forward_row(at(rows[i]), &out[i * d_], &lse[i]);
  }
  double delta(std::int64_t row, const double* o) const override { return ref_.delta(at(row), o); }
  void dq(const std::vector<std::int64_t>& rows, const std::vector<double>& lse,
          const std::vector<double>& delta, std::vector<double>& dq) override {
    dq.assign(rows.size() * d_, 0.0);
    for (std::size_t i = 0; i < rows.size(); ++i)
      ref_.dq_row(at(rows[i]), lse[i], delta[i], &dq[i * d_]);
  }
  void dkv(const std::vector<std::int64_t>& rows, const std::vector<double>& lse_local,
           const std::vector<double>& delta_local, std::vector<double>& dk,
           std::vector<double>& dv) override {
    gather(lse_local, lse_glob_);
    gather(delta_local, delta_glob_);
    // lse and delta at every position, and the gather's buffer.
    peak_ =
        std::max(peak_, ref_.bytes() + 3 * p_.seq_len * static_cast<std::int64_t>(sizeof(double)));
    dk.assign(rows.size() * d_, 0.0);
    dv.assign(rows.size() * d_, 0.0);
    for (std::size_t i = 0; i < rows.size(); ++i)
      ref_.dkv_row(at(rows[i]), lse_glob_, delta_glob_, &dk[i * d_], &dv[i * d_]);
  }

 private:
  // Every rank's local values at their global positions.
  void gather(const std::vector<double>& local, std::vector<double>& global) const {
    const int R = p_.ring_size, n = static_cast<int>(p_.local_rows());
    std::vector<double> all(static_cast<std::size_t>(R) * static_cast<std::size_t>(n));
    RB_MPI_CHECK(MPI_Allgather(local.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, comm_));
    global.assign(static_cast<std::size_t>(p_.seq_len), 0.0);
    for (int rr = 0; rr < R; ++rr) {
      const std::vector<std::int64_t> other = local_positions(p_, rr);
      for (int i = 0; i < n; ++i)
        global[static_cast<std::size_t>(other[static_cast<std::size_t>(i)])] =
            all[static_cast<std::size_t>(rr) * static_cast<std::size_t>(n) +
                static_cast<std::size_t>(i)];
    }
  }
  Reference ref_;
  std::vector<double> lse_glob_, delta_glob_;
};

}  // namespace

std::unique_ptr<HeadReference> make_full_reference(const Problem& p, std::uint64_t seed,
                                                   int ring_rank, MPI_Comm ring_comm) {
  return std::make_unique<FullReference>(p, seed, ring_rank, ring_comm);
}

}  // namespace rb::ring
