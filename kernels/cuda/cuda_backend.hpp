#pragma once
// The GPU AttentionBackend: memory through cudaMalloc (never managed memory) with
// OutOfMemory carrying the request and cudaMemGetInfo's free bytes, copies and kernels on
// one non-blocking compute stream, timing marks as CUDA events on that stream, and the
// high-water mark of the bytes it holds (the naive path's scratch included).
// Needs only backend.hpp (no MPI), so a standalone nvcc build can include it too.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "attention_cuda.hpp"
#include "kernel_paths.hpp"
#include "kernel_policy.hpp"

namespace rb::attn::gpu {

class NaiveAttention;
class CudnnAttention;

class CudaBackend final : public AttentionBackend {
 public:
  // A path of the table (kernel_paths.hpp) or "auto", and a tile variant of that path.
  // std::invalid_argument for a name or tile the table lacks, std::runtime_error for a path
  // this build lacks.
  explicit CudaBackend(const KernelChoice& choice);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // The row's name. cudnn: blocks cuDNN cannot take (fp32, other head dims) run on the flash
  // kernels; one note on stderr says so. auto runs each block on the row of the choice's tuned
  // policy, where it has one, else on auto_kernel_path() (the first built row whose full-speed
  // range takes it); it is named after
  // auto_headline_path(): "cudnn" in builds with cuDNN, "flash" otherwise.
  std::string name() const override;
  bool on_device() const override { return true; }
  void* stream() const override { return stream_; }

  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill_zero(void* p, std::size_t bytes) override;
  void copy_head_chunks(const HeadChunks& c, const HeadTensor& t, bool to_chunks) override;
  void init_forward(float* out, float* lse, std::int64_t rows, int head_dim) override;

  void forward(const ForwardBlock& block) override;
  void backward_prepare(const void* dout, const float* out, float* delta, std::int64_t rows,
                        int head_dim, DType dtype) override;
  void backward(const BackwardBlock& block) override;
  void accumulate(float* dst, const float* src, std::size_t count) override;

  int mark() override;
  double seconds_between(int from, int to) override;
  void reset_marks() override;
  void synchronize() override;

  std::size_t peak_bytes() const override { return peak_; }
  void reset_peak() override { peak_ = current_; }
  std::size_t current_bytes() const { return current_; }
  // cudnn path: blocks that ran on the flash kernels because cuDNN could not take them.
  std::int64_t cudnn_fallback_blocks() const;

 private:
  struct Entry;  // a row's entry points (cuda_backend.cpp binds them to the table)
  static const Entry* entry_of(const KernelPath& row);
  static const Entry& entry_of_row(const KernelPath* row);
  const void* output_copy_for(const void* dout);
  void forward_flash(const ForwardBlock& block);
  void backward_flash(const BackwardBlock& block);
  void forward_naive(const ForwardBlock& block);
  void backward_naive(const BackwardBlock& block);
  void forward_cudnn(const ForwardBlock& block);
  void backward_cudnn(const BackwardBlock& block);
  NaiveAttention& naive();
  CudnnAttention& cudnn();
  void note_fallbacks(std::int64_t before, const char* what);

  friend bool has_entry_points(const KernelPath& row);

  const KernelPath* path_ = nullptr;  // nullptr: auto
  KernelPicker picker_;               // the row of each block (path_, or auto's pick)
  FlashTile tile_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<NaiveAttention> naive_;
  // shared_ptr: destroyable where CudnnAttention is incomplete (builds without cuDNN).
  std::shared_ptr<CudnnAttention> cudnn_;
  // cudnn path: the final output in the data type (cuDNN's backward reads O, not delta),
  // converted from the fp32 O that backward_prepare was given, for its dO buffer.
  struct PendingOutput {
    const float* out = nullptr;
    std::int64_t elements = 0;
    DType dtype = DType::F32;
    const void* dout = nullptr;  // null: nothing to convert (fp32, or no pass prepared)
  };
  PendingOutput pending_out_;
  void* out_copy_ = nullptr;
  std::size_t out_copy_bytes_ = 0;
  const void* out_copy_for_ = nullptr;
  bool fallback_noted_ = false;
  std::unordered_map<void*, std::size_t> sizes_;
  std::size_t current_ = 0;
  std::size_t peak_ = 0;
  std::vector<cudaEvent_t> events_;
  int marks_used_ = 0;
};

// The GPU backend for a kernel path of the table (or "auto") and one of its tile variants,
// on the current CUDA device. Throws as CudaBackend's constructor.
std::unique_ptr<AttentionBackend> make_cuda_backend(const KernelChoice& choice);
// The same with the path's default tile.
std::unique_ptr<AttentionBackend> make_cuda_backend(const std::string& kernel);

// True when CudaBackend can dispatch to `row` (every built CUDA row must be; a test checks).
bool has_entry_points(const KernelPath& row);

// The GPU libraries this build runs on, as (name, version text) for provenance: "CUDA
// runtime", "CUDA driver", "cuBLAS", "cuDNN" ("not built" without the cudnn path). Needs no
// GPU: a call that fails (no driver on this machine) reads "no driver".
std::vector<std::pair<std::string, std::string>> library_versions();

}  // namespace rb::attn::gpu
