// A build without CUDA and NCCL: the collective table still names the NCCL calls, which are
// never reached (the engine factory refuses the cuda backend first).
#include <stdexcept>

#include "profiling/nccl_calls.hpp"

namespace rb::coll::nccl {

#define RB_NCCL_ABSENT(name)                                                                  \
  void name(const Call&, void*, void*) {                                                      \
    throw std::logic_error("NCCL " #name ": this ringbench was built without CUDA and NCCL"); \
  }
RB_NCCL_ABSENT(all_reduce)
RB_NCCL_ABSENT(all_gather)
RB_NCCL_ABSENT(reduce_scatter)
RB_NCCL_ABSENT(all_to_all)
RB_NCCL_ABSENT(broadcast)
RB_NCCL_ABSENT(reduce)
RB_NCCL_ABSENT(sendrecv)
#undef RB_NCCL_ABSENT

}  // namespace rb::coll::nccl
