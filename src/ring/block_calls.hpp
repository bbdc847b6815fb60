#pragma once
// Which kernel calls one ring step makes: this rank's query spans against the K/V spans of the
// block's owner, per branch (attn::Pattern). Today's layouts give a rank up to two spans
// (zigzag), so a step has up to four span pairs; kernels run faster on fewer, larger calls
// (a zigzag causal block as four quarter-size calls ran at 71 % of one causal cuDNN call over
// the same rows on H100). Dense branches are merged into at most one call per step:
//  - the diagonal step (the owner's spans are this rank's): when the positions of the rows,
//    in local row order, increase strictly, "key position <= query position" is "key row <=
//    query row", so one causal call over every local row covers it exactly;
//  - every other step, when the span pairs that attend form a full rectangle (every query row
//    sees every key row) over rows that are adjacent in the buffers: one unmasked call.
// Anything else (dilated branches, partly masked off-diagonal pairs) keeps one call per span
// pair. Calls that are merged carry row-index positions (first 0, stride 1) on both sides:
// the mask they need is expressed in rows, and the rows are where the data is.
#include <vector>

#include "attention.hpp"
#include "ring/problem.hpp"

namespace rb::ring {

struct BlockCall {
  attn::Span q, kv;
  attn::Pattern pattern;
  bool merged = false;  // covers several span pairs
};

// The calls of one step, in a fixed order (branches in order, then query span, then key span).
std::vector<BlockCall> block_calls(const std::vector<attn::Span>& q_spans,
                                   const std::vector<attn::Span>& kv_spans,
                                   const std::vector<attn::Pattern>& patterns);

// Ring rank `rank`'s calls against the K/V of every owner (index: the owner's ring rank).
std::vector<std::vector<BlockCall>> calls_per_owner(const Problem& p, int rank);

}  // namespace rb::ring
