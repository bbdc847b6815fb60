#pragma once
// Independent double-precision reference: single-rank full attention over the global
// sequence with the same masking (Pattern::allows over every key, no span arithmetic) and
// the same branch merge, for any row, from the generated inputs.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <mpi.h>

#include "ring/problem.hpp"
#include "ring/ring_attention.hpp"  // RingResult

namespace rb::ring {

class Reference {
 public:
  Reference(const Problem& p, std::uint64_t seed);
  // Generates the full-sequence Q, K, V, dO of head (b, h) in double.
  void load_head(int b, int h);
  // Output row and log-sum-exp of query position p (lse = -inf, out = 0 with no keys).
  void forward_row(std::int64_t p, double* out, double* lse) const;
  double delta(std::int64_t p, const double* out) const;  // dO_p . O_p
  void dq_row(std::int64_t p, double lse, double delta, double* dq) const;
  // lse/delta of every query position of the loaded head.
  void dkv_row(std::int64_t k, const std::vector<double>& lse, const std::vector<double>& delta,
               double* dk, double* dv) const;

 private:
  // Inputs are stored as float: they are exactly the storage dtype's values (fp32 at most),
  // and it halves the memory of a full-sequence head at very long sequences. All
  // arithmetic is in double.
  const float* row(const std::vector<float>& t, std::int64_t pos) const {
    return t.data() + pos * p_.head_dim;
  }
  double score(std::int64_t qp, std::int64_t kp) const;
  Problem p_;
  std::uint64_t seed_;
  std::vector<attn::Pattern> patterns_;
  int head_ = 0;
  std::vector<float> q_, k_, v_, do_;
};

// Max errors of one tensor against the reference on the compared elements.
struct ErrorStats {
  double max_abs = std::numeric_limits<double>::quiet_NaN();
  double max_rel = std::numeric_limits<double>::quiet_NaN();  // max_abs / max |reference|
  std::int64_t compared = 0;                                   // elements compared
};

struct ParityOptions {
  double full_budget = 2e8;   // per-rank S*S*d*b*h*branches/R at or below: every head and row
  int sample_rows = 32;       // rows per rank otherwise (evenly spaced, first and last included)
  // Measured on a GPU node's host core (H100 VM): 1.7e10 took 43 s (S = 8192, 2 heads,
  // d = 128), so 2e9 keeps the check to a few seconds per point.
  double dkv_budget = 2e9;    // per-rank cost of the sampled heads' full reference forward;
                              // above it dK/dV use the ring's own lse/delta as normaliser
};

struct ParityReport {
  ErrorStats out, dq, dk, dv;
  ErrorStats lse;             // log-sum-exp of the forward rows checked (max_rel vs max |lse_ref|)
  bool sampled = false;       // true: sampled heads and rows
  std::string note;           // how it was sampled, or why dK/dV were not checked
};

// The largest max_rel a dtype's kernels are allowed (computed in that dtype with fp32
// accumulation on the GPU): fp32 2e-4, fp16 5e-3 (10-bit mantissa), bf16 2e-2 (7-bit).
double default_tolerance(attn::DType t);
// The tolerance a sweep checks with: the configured one (> 0), else the dtype's default.
inline double tolerance_for(attn::DType t, double configured) {
  return configured > 0 ? configured : default_tolerance(t);
}

// Collective over ring_comm (gathers the reference log-sum-exp for dK/dV).
ParityReport check_parity(const Problem& p, std::uint64_t seed, int ring_rank, MPI_Comm ring_comm,
                          const RingResult& r, bool backward, const ParityOptions& opt = {});

}  // namespace rb::ring
