// The mixed RingTransport of a ring across nodes: the copy engines on the hops inside a node,
// NCCL on the node-crossing ones (ring/ce_transport.hpp, ring/transport_choice.hpp).
//
// Each exchange posts the copy-engine half first: it blocks only on its neighbours' copy-engine
// halves of the same exchange (offers) and of the one before (pull tokens), never on NCCL, so
// NCCL's first send/recv, which waits for its peer to post, cannot close a cycle. The
// copy-engine half also orders an NCCL receive after the next rank's pull from the buffer it
// overwrites (the compute stream waits on that pull, and NCCL's stream on the compute stream).
#include <memory>
#include <string>

#include "ring/ce_transport.hpp"
#include "ring/nccl_transport.hpp"

namespace rb::ring {
namespace {

class MixedTransport final : public RingTransport {
 public:
  MixedTransport(MPI_Comm ring_comm, AttentionBackend& backend, HopLinks links)
      : copy_engines_(make_copy_engine_transport(ring_comm, backend, links)),
        nccl_(ring_comm, backend, NcclHops{!links.out_local, !links.in_local}) {}

  std::string name() const override { return "copy_engine+nccl"; }
  void post(const void* send, void* recv, std::size_t bytes) override {
    copy_engines_->post(send, recv, bytes);
    nccl_.post(send, recv, bytes);
  }
  double wait() override { return copy_engines_->wait() + nccl_.wait(); }
  void finish() override {
    copy_engines_->finish();
    nccl_.finish();
  }
  int ring_size() const override { return nccl_.ring_size(); }
  int ring_rank() const override { return nccl_.ring_rank(); }

 private:
  std::unique_ptr<RingTransport> copy_engines_;
  NcclTransport nccl_;
};

}  // namespace

std::unique_ptr<RingTransport> make_mixed_transport(MPI_Comm ring_comm, AttentionBackend& backend,
                                                    HopLinks links) {
  return std::make_unique<MixedTransport>(ring_comm, backend, links);
}

}  // namespace rb::ring
