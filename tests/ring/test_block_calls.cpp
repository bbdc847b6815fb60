// The kernel calls of one ring step (src/ring/block_calls.hpp), checked by brute force: for
// every layout, ring size, rank, owner, branch and head, the calls together visit each
// attending (query row, key row) pair exactly once and no other pair, with the mask each call
// states on its own spans. And they are few: a dense causal zigzag step is one call.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "mask.hpp"
#include "ring/block_calls.hpp"
#include "ring/problem.hpp"

namespace {

using rb::ring::Problem;

// (head, query row, key row) -> how many calls visit it, for the calls of one pattern.
using Visits = std::map<std::tuple<int, std::int64_t, std::int64_t>, int>;

void visit(const rb::ring::BlockCall& c, int heads, Visits& v) {
  for (int h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < c.q.count; ++i) {
      const auto keys = rb::attn::partners(c.q.position(i), c.kv, c.pattern, h, true);
      for (std::int64_t j = keys.begin; j < keys.end; j += keys.step)
        ++v[{h, c.q.row0 + i, c.kv.row0 + j}];
    }
}

Visits expected(const Problem& p, int rank, int owner, const rb::attn::Pattern& pat) {
  const auto qpos = rb::ring::local_positions(p, rank), kpos = rb::ring::local_positions(p, owner);
  Visits v;
  for (int h = 0; h < p.heads; ++h)
    for (std::size_t i = 0; i < qpos.size(); ++i)
      for (std::size_t j = 0; j < kpos.size(); ++j) {
        const std::int64_t a = qpos[i], b = kpos[j];
        bool on = !pat.causal || b <= a;
        if (pat.segment > 0)
          on = on && a / pat.segment == b / pat.segment && a % pat.rate == h % pat.rate &&
               b % pat.rate == h % pat.rate;
        if (on) v[{h, static_cast<std::int64_t>(i), static_cast<std::int64_t>(j)}] = 1;
      }
  return v;
}

Problem problem(rb::ring::Layout layout, int R, bool causal,
                std::vector<rb::ring::Branch> branches = {}) {
  Problem p;
  p.heads = 4;
  p.seq_len = 48 * R;
  p.ring_size = R;
  p.layout = layout;
  p.causal = causal;
  p.branches = std::move(branches);
  return p;
}

}  // namespace

TEST_CASE("block calls cover every attending pair exactly once, for every layout and branch") {
  using L = rb::ring::Layout;
  for (L layout : {L::Contiguous, L::Zigzag, L::Striped})
    for (int R : {1, 2, 3, 4})
      for (bool causal : {false, true})
        for (const auto& branches :
             std::vector<std::vector<rb::ring::Branch>>{{}, {{24, 1}, {48, 4}}}) {
          const Problem p = problem(layout, R, causal, branches);
          if (!rb::ring::problem_error(p).empty()) continue;
          for (int rank = 0; rank < R; ++rank)
            for (int owner = 0; owner < R; ++owner) {
              CAPTURE(rb::ring::to_string(layout));
              CAPTURE(R);
              CAPTURE(causal);
              CAPTURE(branches.size());
              CAPTURE(rank);
              CAPTURE(owner);
              const auto calls = rb::ring::block_calls(
                  rb::ring::local_spans(p, rank), rb::ring::local_spans(p, owner), p.patterns());
              for (const auto& pat : p.patterns()) {
                Visits got;
                for (const auto& c : calls)
                  if (c.pattern.segment == pat.segment && c.pattern.rate == pat.rate)
                    visit(c, p.heads, got);
                CHECK(got == expected(p, rank, owner, pat));
              }
            }
        }
}

TEST_CASE("a dense causal zigzag step is one call, the diagonal a causal one") {
  for (int R : {1, 2, 4, 8}) {
    const Problem p = problem(rb::ring::Layout::Zigzag, R, true);
    for (int rank = 0; rank < R; ++rank)
      for (int owner = 0; owner < R; ++owner) {
        CAPTURE(R);
        CAPTURE(rank);
        CAPTURE(owner);
        const auto calls = rb::ring::block_calls(rb::ring::local_spans(p, rank),
                                                 rb::ring::local_spans(p, owner), p.patterns());
        REQUIRE(calls.size() == 1);
        const auto& c = calls[0];
        CHECK(c.pattern.causal == (rank == owner));
        if (rank == owner) {  // every local row against every local row, causal in rows
          CHECK(c.q.count == p.local_rows());
          CHECK(c.kv.count == p.local_rows());
        } else if (owner < rank) {  // both query chunks see the owner's first chunk
          CHECK(c.q.count == p.local_rows());
          CHECK(c.kv.count == p.local_rows() / 2);
          CHECK(c.kv.row0 == 0);
        } else {  // the second query chunk sees both of the owner's chunks
          CHECK(c.q.count == p.local_rows() / 2);
          CHECK(c.q.row0 == p.local_rows() / 2);
          CHECK(c.kv.count == p.local_rows());
        }
        CHECK(c.merged == (R > 1 || rank == owner));
      }
  }
}

TEST_CASE("contiguous and striped steps stay one call per span pair, dilated branches per pair") {
  const Problem contiguous = problem(rb::ring::Layout::Contiguous, 4, true);
  const auto one =
      rb::ring::block_calls(rb::ring::local_spans(contiguous, 2),
                            rb::ring::local_spans(contiguous, 1), contiguous.patterns());
  REQUIRE(one.size() == 1);
  CHECK_FALSE(one[0].merged);
  CHECK(one[0].q.first == 2 * contiguous.local_rows());  // the span's own positions
  const Problem dilated = problem(rb::ring::Layout::Zigzag, 2, true, {{24, 2}});
  const auto calls = rb::ring::block_calls(rb::ring::local_spans(dilated, 1),
                                           rb::ring::local_spans(dilated, 1), dilated.patterns());
  CHECK(calls.size() > 1);
  for (const auto& c : calls) CHECK_FALSE(c.merged);
}
