#pragma once
// Parity of a ring attention result against a double-precision reference: which heads and
// rows are compared (the plan), which reference produces them (full or streamed, see
// ring/head_reference.hpp), and the largest errors per tensor.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <mpi.h>

#include "ring/problem.hpp"
#include "ring/ring_attention.hpp"  // RingResult

namespace rb::ring {

// validate.reference: full: every head and row against the full-sequence reference (O(S)
// memory per rank); sampled: two heads and sample_rows rows per rank against the streamed
// reference (O(S/R)); auto: full while the per-rank cost is within full_budget, else sampled;
// off: no check (the sweep records and reports that).
enum class ParityMode { Auto, Full, Sampled, Off };
const char* to_string(ParityMode m);
ParityMode parity_mode_from_string(const std::string& s);  // throws std::invalid_argument
std::vector<std::string> parity_mode_names();

// Max errors of one tensor against the reference on the compared elements.
struct ErrorStats {
  double max_abs = std::numeric_limits<double>::quiet_NaN();
  double max_rel = std::numeric_limits<double>::quiet_NaN();  // max_abs / max |reference|
  std::int64_t compared = 0;                                  // elements compared
};

struct ParityOptions {
  ParityMode mode = ParityMode::Auto;
  // auto: full at or below this per-rank cost, batch x heads x S x S x d x branches / R
  // (S = 1,024 at d = 128, one head, R = 1); sampled above it.
  double full_budget = 2e8;
  // sampled: rows per rank (evenly spaced, first and last included); 0: auto, enough that a
  // ring compares at least 256 rows: 32 per rank up to R = 8, down to 2 from R = 128. Each
  // sampled row meets all S keys, so rows per rank, not the ring size, set the check's time.
  int sample_rows = 0;
  // Measured on a GPU node's host core (H100 VM): 1.7e10 took 43 s (S = 8192, 2 heads,
  // d = 128), so 2e9 keeps the check to a few seconds per point.
  double dkv_budget = 2e9;  // sampled: per-rank cost of the sampled heads' reference forward
                            // on every local row; above it dK/dV use the ring's own
                            // lse/delta as normaliser
};

struct ParityReport {
  ErrorStats out, dq, dk, dv;
  ErrorStats lse;  // log-sum-exp of the forward rows checked (max_rel vs max |lse_ref|)
  ParityMode mode = ParityMode::Full;  // the one that ran (auto resolved)
  bool sampled = false;                // true: sampled heads and rows
  std::int64_t reference_bytes = 0;    // host bytes this rank's reference held at its largest
  std::string note;                    // how it was sampled, or why dK/dV were not checked
};

// Rows per rank a sampled check compares (opt.sample_rows, or auto's choice for the ring).
int sampled_rows_per_rank(const Problem& p, const ParityOptions& opt);

// auto resolved for this problem: Full or Sampled (Off stays Off).
ParityMode resolve_parity_mode(const Problem& p, const ParityOptions& opt);

// Seconds of one rank's parity check, for --dry-run's estimate: measured on the host cores
// of a 2 x H200 node (sampled, 2 heads, d = 128, causal, backward: 8 s at S = 256K and
// 38-42 s at 1M with R = 1, 7 s and 31 s with R = 2). 0 when off.
double parity_seconds(const Problem& p, const ParityOptions& opt, bool backward);

// The largest max_rel a dtype's kernels are allowed (computed in that dtype with fp32
// accumulation on the GPU): fp32 2e-4, fp16 5e-3 (10-bit mantissa), bf16 2e-2 (7-bit).
double default_tolerance(attn::DType t);
// The tolerance a sweep checks with: the configured one (> 0), else the dtype's default.
inline double tolerance_for(attn::DType t, double configured) {
  return configured > 0 ? configured : default_tolerance(t);
}

// Collective over ring_comm (the streamed reference passes blocks around it; the full one
// gathers the log-sum-exp for dK/dV). opt.mode must not be Off.
ParityReport check_parity(const Problem& p, std::uint64_t seed, int ring_rank, MPI_Comm ring_comm,
                          const RingResult& r, bool backward, const ParityOptions& opt = {});

}  // namespace rb::ring
