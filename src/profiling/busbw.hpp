#pragma once
// The collective operations of the profiling sweeps, how many bytes each one moves at a
// given message size, and the bus-bandwidth factor that turns algorithm bandwidth into
// the figure that is comparable across operations and rank counts. Both follow nccl-tests
// (src/<op>.cu: GetCollByteCount and GetBw) so our numbers line up with it point by point.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rb::coll {

enum class Op { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv };

// Names as written in the YAML and in the HDF5 file, in Op order. "sendrecv" is the ring
// neighbour exchange ring attention uses (send to rank+1, receive from rank-1).
inline const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = {"all_reduce", "all_gather", "reduce_scatter",
                                                  "all_to_all", "broadcast",  "reduce",
                                                  "sendrecv"};
  return names;
}
inline const char* op_name(Op op) { return op_names()[static_cast<std::size_t>(op)].c_str(); }
inline Op op_from_name(const std::string& name) {
  const auto& names = op_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Op>(i);
  throw std::invalid_argument("unknown collective operation '" + name + "'");
}

// Bus-bandwidth factor for a group of n ranks (nccl-tests' convention, n >= 1).
//
// Derivation (nccl-tests doc/PERFORMANCE.md): busbw is the bandwidth each rank's slowest
// link must sustain for the operation to take the measured time, under the optimal
// (ring/pairwise) algorithm, so it can be compared with the hardware's link bandwidth:
//  - all_reduce: a ring reduce-scatter followed by a ring all-gather; each moves (n-1)/n of
//    the buffer through every rank's link, so 2(n-1)/n of the S bytes cross each link.
//  - all_gather, reduce_scatter: one of those two phases: (n-1)/n of the total S bytes
//    (S = the gathered / the scattered-from size) cross each link.
//  - all_to_all: every rank keeps 1/n of its S bytes and sends the other (n-1)/n.
//  - broadcast, reduce: a pipelined chain moves all S bytes once through every link: 1.
//  - send/recv (ring neighbour exchange): one message over one link: 1.
inline double busbw_factor(Op op, int n) {
  const double dn = static_cast<double>(n);
  switch (op) {
    case Op::AllReduce: return 2.0 * (dn - 1.0) / dn;
    case Op::AllGather:
    case Op::ReduceScatter:
    case Op::AllToAll: return (dn - 1.0) / dn;
    case Op::Broadcast:
    case Op::Reduce:
    case Op::SendRecv: return 1.0;
  }
  return 1.0;
}

// Reductions need an arithmetic operation (sum); the others only move data.
inline bool is_reduction(Op op) {
  return op == Op::AllReduce || op == Op::ReduceScatter || op == Op::Reduce;
}

// in-place all_to_all and send/recv are not defined by NCCL (the same buffer would be read
// and written by different peers at once); nccl-tests runs but does not check them. We skip them.
inline bool supports_in_place(Op op) { return op != Op::AllToAll && op != Op::SendRecv; }

// Buffer sizes for one point, as nccl-tests' setupArgs derives them from the requested
// size S (bytes), the element size w and the group size n. count = S / w elements.
struct Sizes {
  std::size_t count = 0;            // the `count` argument passed to the collective call
  std::size_t send_bytes = 0;       // bytes each rank sends from (its input buffer)
  std::size_t recv_bytes = 0;       // bytes each rank receives into (its output buffer)
  std::size_t bytes = 0;            // the reported size: max(send, recv); algbw = bytes / time
  std::size_t send_inplace_offset = 0;  // in-place input = recv buffer + rank * this (NCCL layout)
  std::size_t recv_inplace_offset = 0;  // in-place output = recv buffer + rank * this (NCCL layout)
};

inline Sizes sizes_for(Op op, std::size_t requested_bytes, std::size_t elem, int n) {
  Sizes s;
  const std::size_t count = requested_bytes / elem;
  const std::size_t nn = static_cast<std::size_t>(n);
  switch (op) {
    case Op::AllReduce:
    case Op::Broadcast:
    case Op::Reduce:
    case Op::SendRecv:
      s.count = count;
      s.send_bytes = s.recv_bytes = count * elem;
      break;
    case Op::AllGather:  // count per rank; receives n of them
      s.count = count / nn;
      s.send_bytes = s.count * elem;
      s.recv_bytes = s.count * nn * elem;
      s.send_inplace_offset = s.count * elem;
      break;
    case Op::ReduceScatter:  // count per rank of result; reduces n of them
      s.count = count / nn;
      s.send_bytes = s.count * nn * elem;
      s.recv_bytes = s.count * elem;
      s.recv_inplace_offset = s.count * elem;
      break;
    case Op::AllToAll:  // count per peer
      s.count = count / nn;
      s.send_bytes = s.recv_bytes = s.count * nn * elem;
      break;
  }
  s.bytes = s.send_bytes > s.recv_bytes ? s.send_bytes : s.recv_bytes;
  return s;
}

// algbw = bytes / time; busbw = algbw * busbw_factor(op, n).
inline double algbw(std::size_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
}
inline double busbw(Op op, int n, std::size_t bytes, double seconds) {
  return algbw(bytes, seconds) * busbw_factor(op, n);
}

}  // namespace rb::coll
