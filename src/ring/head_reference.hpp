#pragma once
// The double-precision reference of one head, as the parity check (ring/parity.hpp) asks for
// it: values for this ring rank's rows only, whatever the reference keeps to produce them.
// Two implementations: the full-sequence reference (ring/reference.hpp: every rank regenerates
// the whole head, O(S) memory, independent of the ring) and the streamed one
// (ring/streamed_reference.hpp: blocks travel around the ring, O(S/R) memory per rank).
//
// Rows are local row indices of this ring rank (0 <= row < local_rows). Every call may be
// collective over the ring communicator: every rank of the ring makes the same calls in the
// same order (the row lists may differ).
#include <cstdint>
#include <memory>
#include <vector>

#include <mpi.h>

#include "ring/problem.hpp"

namespace rb::ring {

class HeadReference {
 public:
  virtual ~HeadReference() = default;
  virtual void load_head(int b, int h) = 0;
  // out[i*d..] and lse[i] of rows[i] (lse = -inf, out = 0 for a row with no keys).
  virtual void forward(const std::vector<std::int64_t>& rows, std::vector<double>& out,
                       std::vector<double>& lse) = 0;
  // dO_row . o for one local row (o: d values).
  virtual double delta(std::int64_t row, const double* o) const = 0;
  // dQ of rows[i], given the softmax normaliser (lse[i], delta[i]) of each of those rows.
  virtual void dq(const std::vector<std::int64_t>& rows, const std::vector<double>& lse,
                  const std::vector<double>& delta, std::vector<double>& dq) = 0;
  // dK, dV of rows[i], given the normaliser of every local row of this rank (the other ranks
  // pass theirs: a key's gradient sums over every query of the sequence).
  virtual void dkv(const std::vector<std::int64_t>& rows, const std::vector<double>& lse_local,
                   const std::vector<double>& delta_local, std::vector<double>& dk,
                   std::vector<double>& dv) = 0;
  // Host bytes this rank's reference holds at its largest (inputs and buffers; not the rows'
  // results, which are the caller's).
  virtual std::int64_t peak_bytes() const = 0;
};

// What both implementations keep of this ring rank: the problem, the global positions of its
// local rows, the ring communicator, and the most host bytes held so far.
class RankReference : public HeadReference {
 public:
  std::int64_t peak_bytes() const override { return peak_; }

 protected:
  RankReference(const Problem& p, int ring_rank, MPI_Comm ring_comm)
      : p_(p),
        rank_(ring_rank),
        comm_(ring_comm),
        pos_(local_positions(p, ring_rank)),
        d_(static_cast<std::size_t>(p.head_dim)) {}
  // The global position of local row `row`.
  std::int64_t at(std::int64_t row) const { return pos_[static_cast<std::size_t>(row)]; }

  Problem p_;
  int rank_;
  MPI_Comm comm_;
  std::vector<std::int64_t> pos_;
  std::size_t d_;
  std::int64_t peak_ = 0;
};

// Full-sequence reference: each rank generates every position of the head (4 x S x d floats).
std::unique_ptr<HeadReference> make_full_reference(const Problem& p, std::uint64_t seed,
                                                   int ring_rank, MPI_Comm ring_comm);
// Streamed reference: each rank generates its own block; the other blocks pass around the
// ring (MPI over ring_comm, moved in place), one block of 2 x S/R x d floats at a time.
std::unique_ptr<HeadReference> make_streamed_reference(const Problem& p, std::uint64_t seed,
                                                       int ring_rank, MPI_Comm ring_comm);

}  // namespace rb::ring
