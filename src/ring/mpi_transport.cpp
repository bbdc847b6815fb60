// RingTransport over MPI point-to-point on host buffers: Irecv from the previous ring rank and
// Isend to the next one, on a private duplicate of the ring communicator so ring traffic never
// matches another component's messages: the one RingComms made once per ring size when it is
// attached to the ring communicator, else one of its own.
#include <algorithm>
#include <chrono>
#include <climits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ring/ring_comms.hpp"
#include "ring/mpi_error.hpp"
#include "ring/transport.hpp"
#include "runtime/mpi.hpp"

namespace rb::ring {
namespace {

void check(int rc, const char* call) {
  throw_if_mpi_error(rc, "MPI transport", call);
}

// MPI counts are int: larger messages go as several pieces (matched in order by tag).
constexpr std::size_t kMaxPiece = std::size_t{1} << 30;

class MpiTransport final : public RingTransport {
 public:
  explicit MpiTransport(MPI_Comm ring_comm) {
    comm_ = attached_transport_comm(ring_comm);
    if (comm_ == MPI_COMM_NULL) {
      check(MPI_Comm_dup(ring_comm, &comm_), "MPI_Comm_dup");
      owned_ = Comm(comm_);
    }
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    next_ = (rank_ + 1) % size_;
    prev_ = (rank_ + size_ - 1) % size_;
  }
  ~MpiTransport() override {
    if (!requests_.empty())
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }

  std::string name() const override { return "mpi"; }
  int ring_size() const override { return size_; }
  int ring_rank() const override { return rank_; }

  void post(const void* send, void* recv, std::size_t bytes) override {
    if (!requests_.empty())
      throw std::logic_error(
          "MPI transport: post() while the previous exchange is still in flight");
    int tag = 0;
    for (std::size_t off = 0; off < bytes || (bytes == 0 && tag == 0); off += kMaxPiece, ++tag) {
      const int n = static_cast<int>(std::min(kMaxPiece, bytes - off));
      MPI_Request r;
      check(MPI_Irecv(static_cast<char*>(recv) + off, n, MPI_BYTE, prev_, tag, comm_, &r),
            "MPI_Irecv");
      requests_.push_back(r);
      check(MPI_Isend(static_cast<const char*>(send) + off, n, MPI_BYTE, next_, tag, comm_, &r),
            "MPI_Isend");
      requests_.push_back(r);
      if (bytes == 0) break;
    }
  }

  double wait() override {
    const auto t0 = std::chrono::steady_clock::now();
    if (!requests_.empty()) {
      const int rc =
          MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
      requests_.clear();
      check(rc, "MPI_Waitall");
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  Comm owned_;  // comm_ where it is this transport's own; empty: borrowed from RingComms
  int rank_ = 0, size_ = 1, next_ = 0, prev_ = 0;
  std::vector<MPI_Request> requests_;
};

}  // namespace

std::unique_ptr<RingTransport> make_mpi_transport(MPI_Comm ring_comm) {
  return std::make_unique<MpiTransport>(ring_comm);
}

}  // namespace rb::ring
