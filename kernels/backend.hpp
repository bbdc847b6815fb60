#pragma once
// The interface every attention kernel path is driven through: memory, copies, the block
// forward/backward kernels, and timing marks that are host clocks on the host and CUDA
// events on the GPU. The ring algorithm (src/ring) is written against it once; the host
// (kernels/host) and GPU (kernels/cuda) backends implement it. Plain C++: no MPI, no
// Kokkos, no CUDA headers, so a standalone nvcc build of the kernels can include it.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention.hpp"

namespace rb::attn {

// Thrown by AttentionBackend::allocate when memory runs out; the sweep records the
// point as `oom` with these numbers and goes on with the next point.
class OutOfMemory : public std::runtime_error {
 public:
  OutOfMemory(std::size_t requested, std::size_t free_bytes, const std::string& where)
      : std::runtime_error(where + ": out of memory allocating " + std::to_string(requested) +
                           " B (" + std::to_string(free_bytes) + " B free)"),
        requested_(requested),
        free_(free_bytes) {}
  std::size_t requested() const { return requested_; }
  std::size_t free_bytes() const { return free_; }

 private:
  std::size_t requested_;
  std::size_t free_;
};

// Block calls per kernel path since the last reset: which row of the table really ran each
// forward and backward block call (auto's choices and the cudnn row's fallbacks to flash
// included), and how many of them a tuned policy chose. Recorded per ring point.
struct BlockCalls {
  std::vector<std::pair<std::string, std::int64_t>> by_path;  // in the order first run
  std::int64_t from_policy = 0;

  std::int64_t of(const std::string& path) const {
    for (const auto& [name, n] : by_path)
      if (name == path) return n;
    return 0;
  }
  void add(const std::string& path, bool policy) {
    from_policy += policy ? 1 : 0;
    for (auto& [name, n] : by_path)
      if (name == path) {
        ++n;
        return;
      }
    by_path.emplace_back(path, 1);
  }
};

// One tensor's side of a head-splitting all-to-all (Ulysses, the Ulysses stage of hybrid): rows
// move between the tensor and the `members` chunks of the exchange buffer in one pass, the
// element type changing on the way (fp32 accumulators travel in the input dtype, as the stock
// Ulysses implementations send them). Chunk m holds, `offset` bytes in,
// [batch][local_heads][shard_rows][width] elements of type `wire`. An exchange may carry one
// group of each member's heads (Ulysses' head-group pipeline): member_heads per member in the
// shard tensor, of which the chunk carries local_heads from head0 on.
struct HeadChunks {
  char* data = nullptr;
  std::size_t chunk_bytes = 0, offset = 0;
  DType wire = DType::F32;
  int members = 1, batch = 1, local_heads = 1;
  int member_heads = 0, head0 = 0;  // member_heads 0: local_heads (the whole block)
  std::int64_t shard_rows = 0, width = 1;
};
// The tensor side. A shard tensor ([batch][members * member_heads][shard_rows][width]) gives
// chunk m its heads [m * member_heads + head0, ... + local_heads); a joint tensor
// ([batch][local_heads][joint_rows][width]) gives chunk m the rows member m owns, at joint row
// joint_row[m * shard_rows + r] for the chunk's row r (joint_row in backend memory).
struct HeadTensor {
  char* data = nullptr;
  DType type = DType::F32;
  const std::int64_t* joint_row = nullptr;  // null: a shard tensor
  std::int64_t joint_rows = 0;
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string name() const = 0;  // its kernel path row's name: "kokkos", "flash", ...
  virtual bool on_device() const = 0;
  // The compute stream (cudaStream_t) on the GPU, nullptr on the host; the NCCL transport
  // orders its sends after, and the compute after its receives, through events on it.
  virtual void* stream() const { return nullptr; }

  virtual void* allocate(std::size_t bytes) = 0;  // throws OutOfMemory
  virtual void release(void* p) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;  // device to device
  virtual void fill_zero(void* p, std::size_t bytes) = 0;
  // tensor -> chunks (to_chunks) or chunks -> tensor, converting between t.type and c.wire, in
  // the compute stream's order: one pass over the data, however the rows are laid out.
  virtual void copy_head_chunks(const HeadChunks& c, const HeadTensor& t, bool to_chunks) = 0;
  // out = 0 and lse = -inf for `rows` rows of width head_dim (rows = batch*heads*q_rows).
  virtual void init_forward(float* out, float* lse, std::int64_t rows, int head_dim) = 0;

  virtual void forward(const attn::ForwardBlock& block) = 0;
  // delta[r] = sum_d dout[r,d] * out[r,d] for `rows` rows; dout in dtype, out fp32.
  virtual void backward_prepare(const void* dout, const float* out, float* delta, std::int64_t rows,
                                int head_dim, attn::DType dtype) = 0;
  virtual void backward(const attn::BackwardBlock& block) = 0;
  // dst[i] += src[i] for `count` fp32 values in backend memory, in the compute stream's order:
  // the ring backward adds a step's dK/dV contribution to the partial sums received from the
  // previous rank. The default stages through host memory (correct anywhere, slow); backends
  // override it with a kernel.
  virtual void accumulate(float* dst, const float* src, std::size_t count) {
    std::vector<float> a(count), b(count);
    copy_to_host(a.data(), dst, count * sizeof(float));
    copy_to_host(b.data(), src, count * sizeof(float));
    for (std::size_t i = 0; i < count; ++i) a[i] += b[i];
    copy_to_device(dst, a.data(), count * sizeof(float));
  }

  // Timing marks in the compute stream's order. mark() returns an id valid until
  // reset_marks(); seconds_between() may synchronise (call it after the timed region).
  virtual int mark() = 0;
  virtual double seconds_between(int from, int to) = 0;
  virtual void reset_marks() = 0;
  virtual void synchronize() = 0;

  // Bytes of memory this backend holds at its high-water mark since the last reset.
  virtual std::size_t peak_bytes() const = 0;
  virtual void reset_peak() = 0;

  const BlockCalls& block_calls() const { return calls_; }
  void reset_block_calls() { calls_ = BlockCalls{}; }

 protected:
  // Called by forward() and backward() with the row that ran the block.
  void count_block(const std::string& path, bool from_policy) { calls_.add(path, from_policy); }

 private:
  BlockCalls calls_;
};

}  // namespace rb::attn
