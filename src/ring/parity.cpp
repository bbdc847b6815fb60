#include "ring/parity.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "names.hpp"
#include "ring/head_reference.hpp"

namespace rb::ring {
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

double full_cost(const Problem& p) {
  return static_cast<double>(p.batch) * p.heads * static_cast<double>(p.seq_len) *
         static_cast<double>(p.seq_len) * p.head_dim * static_cast<double>(p.patterns().size()) /
         p.ring_size;
}

// Which heads and rows the check compares, and how it says so in the report.
struct ParityPlan {
  std::vector<std::pair<int, int>> heads;  // (batch, head)
  bool all_rows = true;  // reference forward on every local row (dK/dV's exact normaliser)
  std::vector<std::int64_t> fwd_rows, grad_rows;  // grad_rows is a subset of fwd_rows
};

std::string sampled_note(const Problem& p, const ParityPlan& plan, std::size_t sampled,
                         bool backward) {
  const int g = p.group();
  std::string note = "sampled, streamed reference: heads (b,h)=(0,0)";
  if (plan.heads.size() > static_cast<std::size_t>(g))
    note += " and (" + std::to_string(p.batch - 1) + "," + std::to_string(p.heads - 1) + ")";
  if (g > 1) note += ", each with the " + std::to_string(g) + " heads of its K/V group";
  note += plan.all_rows ? ", out on every local row"
                        : ", out on " + std::to_string(sampled) + " rows per rank";
  if (backward) note += ", gradients on " + std::to_string(sampled) + " rows per rank";
  return note;
}

ParityPlan plan_parity(const Problem& p, bool backward, const ParityOptions& opt,
                       ParityReport& rep) {
  const std::int64_t n = p.local_rows();
  ParityPlan plan;
  rep.sampled = rep.mode == ParityMode::Sampled;
  std::vector<std::int64_t> every(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) every[static_cast<std::size_t>(i)] = i;
  if (!rep.sampled) {
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads; ++h) plan.heads.emplace_back(b, h);
    plan.fwd_rows = plan.grad_rows = every;
    rep.note = "full: every element of every head against the full-sequence reference";
    return plan;
  }
  // The first and last heads, each with every head of its K/V group (GQA): a K/V head's
  // gradient is the sum over its group, so the whole group is checked together.
  const int g = p.group();
  for (int h = 0; h < g; ++h) plan.heads.emplace_back(0, h);
  if (p.batch > 1 || p.heads > g)
    for (int h = p.heads - g; h < p.heads; ++h) plan.heads.emplace_back(p.batch - 1, h);
  // dK/dV need the reference lse/delta of every query of a head: each rank computes its own
  // rows (cost per rank: heads x local rows x S x d x branches).
  const double all_rows_cost = static_cast<double>(plan.heads.size()) * static_cast<double>(n) *
                               static_cast<double>(p.seq_len) * p.head_dim *
                               static_cast<double>(p.patterns().size());
  plan.all_rows = all_rows_cost <= opt.dkv_budget;
  const std::vector<std::int64_t> sample = sample_rows(n, sampled_rows_per_rank(p, opt));
  plan.fwd_rows = plan.all_rows ? every : sample;
  plan.grad_rows = sample;
  rep.note = sampled_note(p, plan, sample.size(), backward);
  if (backward && !plan.all_rows)
    rep.note +=
        "; dK/dV use the ring's own log-sum-exp and rowsum(dO*O) as softmax normaliser "
        "(a reference forward on every row would cost " +
        std::to_string(all_rows_cost) + " > budget " + std::to_string(opt.dkv_budget) +
        "; the ring's log-sum-exp is "
        "checked on the sampled rows)";
  return plan;
}

// The comparison of one rank's results with a reference, head by head.
class ParityCheck {
 public:
  ParityCheck(const Problem& p, HeadReference& ref, const RingResult& r)
      : p_(p),
        ref_(ref),
        r_(r),
        d_(static_cast<std::size_t>(p.head_dim)),
        n_(static_cast<std::size_t>(p.local_rows())),
        lse_loc_(n_),
        delta_loc_(n_) {}

  void load_head(int b, int h) {
    ref_.load_head(b, h);
    base_ = (static_cast<std::size_t>(b) * static_cast<std::size_t>(p_.heads) +
             static_cast<std::size_t>(h)) *
            n_;
    const int g = p_.group();
    kv_base_ = (static_cast<std::size_t>(b) * static_cast<std::size_t>(p_.num_kv_heads()) +
                static_cast<std::size_t>(h / g)) *
               n_;
    first_of_group_ = h % g == 0;
    last_of_group_ = h % g == g - 1;
  }

  // O and lse on `rows`; keeps the reference lse/delta of those rows for the gradients.
  void forward(const std::vector<std::int64_t>& rows) {
    ref_.forward(rows, o_, lse_);
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::size_t i = static_cast<std::size_t>(rows[k]);
      for (std::size_t c = 0; c < d_; ++c) out_.add(r_.out[(base_ + i) * d_ + c], o_[k * d_ + c]);
      const double lse = lse_[k], got = r_.lse[base_ + i];
      lse_loc_[i] = lse;
      if (!(std::isinf(lse) && std::isinf(got) && lse < 0 && got < 0)) lse_err_.add(got, lse);
      delta_loc_[i] = ref_.delta(rows[k], &o_[k * d_]);
    }
  }

  void dq(const std::vector<std::int64_t>& rows) {
    std::vector<double> lse(rows.size()), delta(rows.size());
    for (std::size_t k = 0; k < rows.size(); ++k) {
      lse[k] = lse_loc_[static_cast<std::size_t>(rows[k])];
      delta[k] = delta_loc_[static_cast<std::size_t>(rows[k])];
    }
    ref_.dq(rows, lse, delta, g_);
    compare(rows, g_, r_.dq, dq_, base_);
  }

  // Past the budget the normaliser of every query comes from the ring itself (fp32 lse, and
  // delta from the ring's O and the generated dO): cheap, and the lse was just compared with
  // the reference on the sampled rows.
  void use_ring_normalisers() {
    std::vector<double> o_ring(d_);
    for (std::size_t i = 0; i < n_; ++i) {
      lse_loc_[i] = r_.lse[base_ + i];
      for (std::size_t c = 0; c < d_; ++c) o_ring[c] = r_.out[(base_ + i) * d_ + c];
      delta_loc_[i] = ref_.delta(static_cast<std::int64_t>(i), o_ring.data());
    }
  }

  // A K/V head's dK/dV is the sum of its group's heads' (GQA): summed over the group's heads
  // (checked in order), compared when the group's last head is done.
  void dkv(const std::vector<std::int64_t>& rows) {
    ref_.dkv(rows, lse_loc_, delta_loc_, g_, g2_);
    if (first_of_group_) {
      dk_sum_ = g_;
      dv_sum_ = g2_;
    } else {
      for (std::size_t i = 0; i < g_.size(); ++i) dk_sum_[i] += g_[i];
      for (std::size_t i = 0; i < g2_.size(); ++i) dv_sum_[i] += g2_[i];
    }
    if (!last_of_group_) return;
    compare(rows, dk_sum_, r_.dk, dk_, kv_base_);
    compare(rows, dv_sum_, r_.dv, dv_, kv_base_);
  }

  void report(ParityReport& rep) const {
    rep.out = out_.stats();
    rep.lse = lse_err_.stats();
    rep.dq = dq_.stats();
    rep.dk = dk_.stats();
    rep.dv = dv_.stats();
    // The reference's own buffers plus this check's per-row normalisers and row results.
    const std::size_t mine = (lse_loc_.size() + delta_loc_.size() + lse_.capacity() +
                              o_.capacity() + g_.capacity() + g2_.capacity()) *
                             sizeof(double);
    rep.reference_bytes = ref_.peak_bytes() + static_cast<std::int64_t>(mine);
  }

 private:
  void compare(const std::vector<std::int64_t>& rows, const std::vector<double>& ref,
               const std::vector<float>& got, Accum& acc, std::size_t base) const {
    for (std::size_t k = 0; k < rows.size(); ++k)
      for (std::size_t c = 0; c < d_; ++c)
        acc.add(got[(base + static_cast<std::size_t>(rows[k])) * d_ + c], ref[k * d_ + c]);
  }
  const Problem& p_;
  HeadReference& ref_;
  const RingResult& r_;
  std::size_t d_, n_, base_ = 0, kv_base_ = 0;
  bool first_of_group_ = true, last_of_group_ = true;
  std::vector<double> lse_loc_, delta_loc_, o_, lse_, g_, g2_, dk_sum_, dv_sum_;
  Accum out_, dq_, dk_, dv_, lse_err_;
};

// validate.reference's words.
const std::pair<ParityMode, const char*> kParityModes[] = {{ParityMode::Auto, "auto"},
                                                           {ParityMode::Full, "full"},
                                                           {ParityMode::Sampled, "sampled"},
                                                           {ParityMode::Off, "off"}};

}  // namespace

const char* to_string(ParityMode m) {
  return name_of(kParityModes, m, "auto");
}

std::vector<std::string> parity_mode_names() {
  return names_of(kParityModes);
}

ParityMode parity_mode_from_string(const std::string& s) {
  if (const auto m = find_value(kParityModes, s)) return *m;
  throw std::invalid_argument("unknown parity reference '" + s + "' (auto, full, sampled or off)");
}

int sampled_rows_per_rank(const Problem& p, const ParityOptions& opt) {
  if (opt.sample_rows > 0) return opt.sample_rows;
  return std::clamp((256 + p.ring_size - 1) / p.ring_size, 2, 32);
}

ParityMode resolve_parity_mode(const Problem& p, const ParityOptions& opt) {
  if (opt.mode != ParityMode::Auto) return opt.mode;
  return full_cost(p) <= opt.full_budget ? ParityMode::Full : ParityMode::Sampled;
}

double parity_seconds(const Problem& p, const ParityOptions& opt, bool backward) {
  // Fitted to the measurements in the header: per (compared row x key x dim) over the three
  // passes, and per (local row x dim) for the values each rank generates (about 7 per row and
  // dim: two tensors in each pass, dO for the normalisers); a forward-only check does one
  // pass of each. The full reference generates Q, K, V, dO of every position per head.
  constexpr double kPerPairDim = 2.2e-9, kPerLocalRowDim = 77e-9, kPerFullValue = 20e-9;
  const ParityMode mode = resolve_parity_mode(p, opt);
  if (mode == ParityMode::Off) return 0;
  const double S = static_cast<double>(p.seq_len), n = static_cast<double>(p.local_rows()),
               d = p.head_dim, branches = static_cast<double>(p.patterns().size());
  const double passes = backward ? 1.0 : 1.0 / 3.0;
  // The reference visits allowed (row, key) pairs only: under a causal mask about half (the
  // zigzag checks of runs J and K took 0.55-0.6x the unmasked ones at the same shape).
  const double pairs = passes * (p.causal ? 0.5 : 1.0);
  if (mode == ParityMode::Full)
    return static_cast<double>(p.batch) * p.heads *
           (kPerPairDim * pairs * n * S * d * branches + kPerFullValue * 4 * S * d);
  const double heads = (p.batch * p.heads > p.group() ? 2.0 : 1.0) * p.group();
  const double rows = std::min<double>(n, sampled_rows_per_rank(p, opt));
  return heads * (kPerPairDim * pairs * rows * S * d * branches + kPerLocalRowDim * passes * n * d);
}

double default_tolerance(attn::DType t) {
  switch (t) {
    case attn::DType::F32:
      return 2e-4;
    case attn::DType::F16:
      return 5e-3;
    case attn::DType::BF16:
      return 2e-2;
  }
  return 2e-4;
}

ParityReport check_parity(const Problem& p, std::uint64_t seed, int ring_rank, MPI_Comm ring_comm,
                          const RingResult& r, bool backward, const ParityOptions& opt) {
  ParityReport rep;
  rep.mode = resolve_parity_mode(p, opt);
  if (rep.mode == ParityMode::Off)
    throw std::invalid_argument("check_parity: the parity check is off");
  const ParityPlan plan = plan_parity(p, backward, opt, rep);
  const std::unique_ptr<HeadReference> ref =
      rep.sampled ? make_streamed_reference(p, seed, ring_rank, ring_comm)
                  : make_full_reference(p, seed, ring_rank, ring_comm);
  ParityCheck check(p, *ref, r);
  for (auto [b, h] : plan.heads) {
    check.load_head(b, h);
    check.forward(plan.fwd_rows);
    if (!backward) continue;
    check.dq(plan.grad_rows);
    if (!plan.all_rows) check.use_ring_normalisers();
    check.dkv(plan.grad_rows);
  }
  check.report(rep);
  return rep;
}

}  // namespace rb::ring
