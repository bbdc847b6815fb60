#pragma once
// Independent double-precision reference: single-rank full attention over the global
// sequence with the same masking (Pattern::allows over every key, no span arithmetic) and
// the same branch merge, for any row, from the generated inputs. It holds the whole head
// (O(S) memory per rank): validate.reference: full, and the oracle the streamed reference
// (ring/streamed_reference.cpp) is tested against. make_full_reference
// (ring/head_reference.hpp) puts it behind the parity check's interface.
#include <cstdint>
#include <vector>

#include "ring/problem.hpp"

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
  std::int64_t bytes() const {
    return static_cast<std::int64_t>(
        (q_.capacity() + k_.capacity() + v_.capacity() + do_.capacity()) * sizeof(float));
  }

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

}  // namespace rb::ring
