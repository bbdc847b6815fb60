#include "ring/reference.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "ring/inputs.hpp"

namespace rb::ring {

Reference::Reference(const Problem& p, std::uint64_t seed)
    : p_(p), seed_(seed), patterns_(p.patterns()) {}

void Reference::load_head(int b, int h) {
  head_ = h;
  const std::int64_t S = p_.seq_len, d = p_.head_dim;
  auto fill = [&](std::vector<float>& t, Tensor which) {
    t.resize(static_cast<std::size_t>(S * d));
    for (std::int64_t pos = 0; pos < S; ++pos)
      for (int c = 0; c < d; ++c)
        t[static_cast<std::size_t>(pos * d + c)] = input_value(seed_, which, p_.dtype, b, h, pos, c);
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

struct Accum {
  double max_abs = 0.0, max_ref = 0.0;
  std::int64_t n = 0;
  void add(double got, double ref) {
    // A NaN or infinite result must fail the check (std::max would silently drop a NaN).
    double e = std::abs(got - ref);
    if (!std::isfinite(e)) e = std::numeric_limits<double>::infinity();
    max_abs = std::max(max_abs, e);
    max_ref = std::max(max_ref, std::abs(ref));
    ++n;
  }
  ErrorStats stats() const {
    ErrorStats s;
    if (n == 0) return s;
    s.max_abs = max_abs;
    s.max_rel = max_ref > 0 ? max_abs / max_ref : max_abs;
    s.compared = n;
    return s;
  }
};

std::vector<std::int64_t> sample_rows(std::int64_t n, int k) {
  std::vector<std::int64_t> rows;
  if (n <= k) {
    for (std::int64_t i = 0; i < n; ++i) rows.push_back(i);
    return rows;
  }
  for (int j = 0; j < k; ++j) rows.push_back(static_cast<std::int64_t>(j) * (n - 1) / (k - 1));
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

}  // namespace

namespace {

// Which heads and rows the check compares, and how it says so in the report.
struct ParityPlan {
  std::vector<std::pair<int, int>> heads;  // (batch, head)
  bool all_rows = true;  // reference forward on every local row (dK/dV's exact normaliser)
  std::vector<std::int64_t> fwd_rows, grad_rows;  // grad_rows is a subset of fwd_rows
};

ParityPlan plan_parity(const Problem& p, bool backward, const ParityOptions& opt, ParityReport& rep) {
  const std::int64_t n = p.local_rows(), S = p.seq_len, d = p.head_dim, R = p.ring_size;
  const double nb = static_cast<double>(p.patterns().size());
  const double full_cost = static_cast<double>(p.batch) * p.heads * static_cast<double>(S) *
                           static_cast<double>(S) * static_cast<double>(d) * nb / static_cast<double>(R);
  ParityPlan plan;
  rep.sampled = full_cost > opt.full_budget;
  if (!rep.sampled) {
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads; ++h) plan.heads.emplace_back(b, h);
  } else {
    plan.heads.emplace_back(0, 0);
    if (p.batch > 1 || p.heads > 1) plan.heads.emplace_back(p.batch - 1, p.heads - 1);
  }
  // dK/dV need the reference lse/delta of every query of a head: each rank computes its own
  // rows and the ring gathers them (cost per rank: heads x local rows x S x d).
  const double all_rows_cost = static_cast<double>(plan.heads.size()) * static_cast<double>(n) *
                               static_cast<double>(S) * static_cast<double>(d) * nb;
  plan.all_rows = !rep.sampled || all_rows_cost <= opt.dkv_budget;
  std::vector<std::int64_t> every(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) every[static_cast<std::size_t>(i)] = i;
  const std::vector<std::int64_t> sample = sample_rows(n, opt.sample_rows);
  plan.fwd_rows = plan.all_rows ? every : sample;
  plan.grad_rows = rep.sampled ? sample : every;
  if (rep.sampled)
    rep.note = "sampled: heads (b,h)=(0,0)" +
               std::string(plan.heads.size() > 1 ? " and (" + std::to_string(p.batch - 1) + "," +
                                                       std::to_string(p.heads - 1) + ")"
                                                 : "") +
               (plan.all_rows ? ", out on every local row"
                              : ", out on " + std::to_string(sample.size()) + " rows per rank") +
               (backward ? ", gradients on " + std::to_string(sample.size()) + " rows per rank" : "");
  if (backward && !plan.all_rows)
    rep.note += "; dK/dV use the ring's own log-sum-exp and rowsum(dO*O) as softmax normaliser "
                "(a full reference forward would cost " + std::to_string(all_rows_cost) +
                " > budget " + std::to_string(opt.dkv_budget) + "; the ring's log-sum-exp is "
                "checked on the sampled rows)";
  return plan;
}

// The comparison of one rank's results with the reference, head by head.
class ParityCheck {
 public:
  ParityCheck(const Problem& p, std::uint64_t seed, int ring_rank, const RingResult& r)
      : p_(p), ref_(p, seed), r_(r), pos_(local_positions(p, ring_rank)),
        d_(static_cast<std::size_t>(p.head_dim)), n_(static_cast<std::size_t>(p.local_rows())),
        o_(d_), g_(d_), g2_(d_), lse_loc_(n_), delta_loc_(n_),
        lse_glob_(static_cast<std::size_t>(p.seq_len)), delta_glob_(lse_glob_.size()) {}

  void load_head(int b, int h) {
    ref_.load_head(b, h);
    base_ = (static_cast<std::size_t>(b) * static_cast<std::size_t>(p_.heads) + static_cast<std::size_t>(h)) * n_;
  }

  // O and lse on `rows`; keeps the reference lse/delta of those rows for the gradients.
  void forward(const std::vector<std::int64_t>& rows) {
    for (std::int64_t i64 : rows) {
      const std::size_t i = static_cast<std::size_t>(i64);
      double lse = 0;
      ref_.forward_row(pos_[i], o_.data(), &lse);
      for (std::size_t c = 0; c < d_; ++c) out_.add(r_.out[(base_ + i) * d_ + c], o_[c]);
      lse_loc_[i] = lse;
      const double got = r_.lse[base_ + i];
      if (!(std::isinf(lse) && std::isinf(got) && lse < 0 && got < 0)) lse_err_.add(got, lse);
      delta_loc_[i] = ref_.delta(pos_[i], o_.data());
    }
  }

  void dq(const std::vector<std::int64_t>& rows) {
    for (std::int64_t i64 : rows) {
      const std::size_t i = static_cast<std::size_t>(i64);
      ref_.dq_row(pos_[i], lse_loc_[i], delta_loc_[i], g_.data());
      for (std::size_t c = 0; c < d_; ++c) dq_.add(r_.dq[(base_ + i) * d_ + c], g_[c]);
    }
  }

  // Past the budget the normaliser of every query comes from the ring itself (fp32 lse, and
  // delta from the ring's O and the generated dO): cheap, and the lse was just compared with
  // the reference on the sampled rows.
  void use_ring_normalisers() {
    std::vector<double> o_ring(d_);
    for (std::size_t i = 0; i < n_; ++i) {
      lse_loc_[i] = r_.lse[base_ + i];
      for (std::size_t c = 0; c < d_; ++c) o_ring[c] = r_.out[(base_ + i) * d_ + c];
      delta_loc_[i] = ref_.delta(pos_[i], o_ring.data());
    }
  }

  // Collective over the ring: every rank's lse/delta at their global positions.
  void gather_normalisers(MPI_Comm ring_comm) {
    const int R = p_.ring_size, n = static_cast<int>(n_);
    std::vector<double> lse_all(static_cast<std::size_t>(R) * n_), delta_all(lse_all.size());
    MPI_Allgather(lse_loc_.data(), n, MPI_DOUBLE, lse_all.data(), n, MPI_DOUBLE, ring_comm);
    MPI_Allgather(delta_loc_.data(), n, MPI_DOUBLE, delta_all.data(), n, MPI_DOUBLE, ring_comm);
    for (int rr = 0; rr < R; ++rr) {
      const std::vector<std::int64_t> other = local_positions(p_, rr);
      for (std::size_t i = 0; i < n_; ++i) {
        const std::size_t src = static_cast<std::size_t>(rr) * n_ + i;
        lse_glob_[static_cast<std::size_t>(other[i])] = lse_all[src];
        delta_glob_[static_cast<std::size_t>(other[i])] = delta_all[src];
      }
    }
  }

  void dkv(const std::vector<std::int64_t>& rows) {
    for (std::int64_t j64 : rows) {
      const std::size_t j = static_cast<std::size_t>(j64);
      ref_.dkv_row(pos_[j], lse_glob_, delta_glob_, g_.data(), g2_.data());
      for (std::size_t c = 0; c < d_; ++c) {
        dk_.add(r_.dk[(base_ + j) * d_ + c], g_[c]);
        dv_.add(r_.dv[(base_ + j) * d_ + c], g2_[c]);
      }
    }
  }

  void report(ParityReport& rep) const {
    rep.out = out_.stats();
    rep.lse = lse_err_.stats();
    rep.dq = dq_.stats();
    rep.dk = dk_.stats();
    rep.dv = dv_.stats();
  }

 private:
  const Problem& p_;
  Reference ref_;
  const RingResult& r_;
  std::vector<std::int64_t> pos_;
  std::size_t d_, n_, base_ = 0;
  std::vector<double> o_, g_, g2_, lse_loc_, delta_loc_, lse_glob_, delta_glob_;
  Accum out_, dq_, dk_, dv_, lse_err_;
};

}  // namespace

double default_tolerance(attn::DType t) {
  switch (t) {
    case attn::DType::F32: return 2e-4;
    case attn::DType::F16: return 5e-3;
    case attn::DType::BF16: return 2e-2;
  }
  return 2e-4;
}

ParityReport check_parity(const Problem& p, std::uint64_t seed, int ring_rank, MPI_Comm ring_comm,
                          const RingResult& r, bool backward, const ParityOptions& opt) {
  ParityReport rep;
  const ParityPlan plan = plan_parity(p, backward, opt, rep);
  ParityCheck check(p, seed, ring_rank, r);
  for (auto [b, h] : plan.heads) {
    check.load_head(b, h);
    check.forward(plan.fwd_rows);
    if (!backward) continue;
    check.dq(plan.grad_rows);
    if (!plan.all_rows) check.use_ring_normalisers();
    check.gather_normalisers(ring_comm);
    check.dkv(plan.grad_rows);
  }
  check.report(rep);
  return rep;
}

}  // namespace rb::ring
