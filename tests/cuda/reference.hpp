#pragma once
// Double-precision host reference of one block pair (attention.hpp semantics) for the GPU
// kernel tests: forward merged into a running (out, lse), and the backward's increments.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention.hpp"

namespace rb::test {

struct HostProblem {
  attn::Dims dims;
  attn::Span q, kv;
  attn::Pattern pattern;
  double scale = 1.0;
  // Inputs as the kernels see them (already rounded to the tested dtype), [b][h][rows][d].
  std::vector<double> Q, K, V, dO;

  std::size_t qi(int bh, std::int64_t row, int c) const {
    return (std::size_t(bh) * dims.q_rows + row) * dims.head_dim + c;
  }
  std::size_t ki(int bh, std::int64_t row, int c) const {
    return (std::size_t(bh) * dims.kv_rows + row) * dims.head_dim + c;
  }

  // Scores of query row i of the span against every key of the span (-inf where masked).
  void scores(int bh, std::int64_t i, std::vector<double>& s) const {
    const int head = bh % dims.heads;
    const std::int64_t p = q.position(i);
    s.assign(kv.count, -std::numeric_limits<double>::infinity());
    for (std::int64_t j = 0; j < kv.count; ++j) {
      if (!pattern.allows(p, kv.position(j), head)) continue;
      double acc = 0;
      for (int c = 0; c < dims.head_dim; ++c)
        acc += Q[qi(bh, q.row0 + i, c)] * K[ki(bh, kv.row0 + j, c)];
      s[j] = acc * scale;
    }
  }

  // Block-only forward: o (q.count rows per head) and lse (-inf where nothing is allowed).
  void forward(std::vector<double>& o, std::vector<double>& lse) const {
    const int bhn = dims.batch * dims.heads, d = dims.head_dim;
    o.assign(std::size_t(bhn) * q.count * d, 0.0);
    lse.assign(std::size_t(bhn) * q.count, -std::numeric_limits<double>::infinity());
    std::vector<double> s;
    for (int bh = 0; bh < bhn; ++bh)
      for (std::int64_t i = 0; i < q.count; ++i) {
        scores(bh, i, s);
        double mx = -std::numeric_limits<double>::infinity();
        for (double x : s) mx = std::max(mx, x);
        if (mx == -std::numeric_limits<double>::infinity()) continue;
        double sum = 0;
        for (double x : s) sum += std::exp(x - mx);
        const double l = mx + std::log(sum);
        lse[std::size_t(bh) * q.count + i] = l;
        for (std::int64_t j = 0; j < kv.count; ++j) {
          const double pr = std::exp(s[j] - l);
          if (pr == 0) continue;
          for (int c = 0; c < d; ++c)
            o[(std::size_t(bh) * q.count + i) * d + c] += pr * V[ki(bh, kv.row0 + j, c)];
        }
      }
  }

  // Increments of dq, dk, dv (full buffers) given the final lse and delta per q row of the
  // span (indexed [bh][i]).
  void backward(const std::vector<double>& lse, const std::vector<double>& delta,
                std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) const {
    const int bhn = dims.batch * dims.heads, d = dims.head_dim;
    dq.assign(std::size_t(bhn) * dims.q_rows * d, 0.0);
    dk.assign(std::size_t(bhn) * dims.kv_rows * d, 0.0);
    dv.assign(std::size_t(bhn) * dims.kv_rows * d, 0.0);
    std::vector<double> s;
    for (int bh = 0; bh < bhn; ++bh)
      for (std::int64_t i = 0; i < q.count; ++i) {
        const double l = lse[std::size_t(bh) * q.count + i];
        if (l == -std::numeric_limits<double>::infinity()) continue;
        const double dl = delta[std::size_t(bh) * q.count + i];
        scores(bh, i, s);
        for (std::int64_t j = 0; j < kv.count; ++j) {
          if (s[j] == -std::numeric_limits<double>::infinity()) continue;
          const double pr = std::exp(s[j] - l);
          double dp = 0;
          for (int c = 0; c < d; ++c) dp += dO[qi(bh, q.row0 + i, c)] * V[ki(bh, kv.row0 + j, c)];
          const double ds = pr * (dp - dl);
          for (int c = 0; c < d; ++c) {
            dv[ki(bh, kv.row0 + j, c)] += pr * dO[qi(bh, q.row0 + i, c)];
            dq[qi(bh, q.row0 + i, c)] += scale * ds * K[ki(bh, kv.row0 + j, c)];
            dk[ki(bh, kv.row0 + j, c)] += scale * ds * Q[qi(bh, q.row0 + i, c)];
          }
        }
      }
  }
};

}  // namespace rb::test
