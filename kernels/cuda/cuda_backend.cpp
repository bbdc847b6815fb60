#include "cuda_backend.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>

#include "attention_cuda.hpp"
#include "check.hpp"
#include "cudnn_attention.hpp"

namespace rb::attn::gpu {

// The entry points of the CUDA rows of kernel_paths(): the backend dispatches every block
// through the row it runs on. Bound by name because the table is plain C++ that host-only
// targets link without this library; has_entry_points() lets a test check every built row.
struct CudaBackend::Entry {
  const char* path;
  void (CudaBackend::*forward)(const ForwardBlock&);
  void (CudaBackend::*backward)(const BackwardBlock&);
  bool flash_tiles;  // its tile variants are the flash kernels' (TileVariant::flash)
};

const CudaBackend::Entry* CudaBackend::entry_of(const KernelPath& row) {
  static const Entry entries[] = {
      {"flash", &CudaBackend::forward_flash, &CudaBackend::backward_flash, true},
      {"cudnn", &CudaBackend::forward_cudnn, &CudaBackend::backward_cudnn, false},
      {"naive", &CudaBackend::forward_naive, &CudaBackend::backward_naive, false},
  };
  if (row.device != Device::Cuda) return nullptr;
  for (const Entry& e : entries)
    if (std::string(row.name) == e.path) return &e;
  return nullptr;
}

bool has_entry_points(const KernelPath& row) {
  return CudaBackend::entry_of(row) != nullptr;
}

namespace {

const KernelPath& built_cuda_row(const std::string& name) {
  const KernelPath* row = find_kernel_path(name, Device::Cuda);
  if (!row) {
    std::string known;
    for (const auto& c : kernel_choices(Device::Cuda)) known += (known.empty() ? "" : ", ") + c;
    throw std::invalid_argument("unknown CUDA attention kernel '" + name + "' (expected " + known +
                                ")");
  }
  if (!row->built)
    throw std::runtime_error("CUDA attention kernel '" + name + "' is not in this build (" +
                             row->missing + ")");
  return *row;
}

}  // namespace

bool flash_tensor_core_supported(DType dtype, int head_dim) {
  static const KernelPath& flash = *find_kernel_path("flash", Device::Cuda);
  return flash.full_speed.takes(dtype, head_dim, false, false);
}

CudaBackend::CudaBackend(const KernelChoice& choice) {
  if (choice.path == "auto") {
    if (!choice.tile.empty() && choice.tile != "default")
      throw std::invalid_argument("CUDA attention kernel 'auto' has no tile variants");
  } else {
    path_ = &built_cuda_row(choice.path);
    const TileVariant* tile = find_tile(*path_, choice.tile);
    if (!tile)
      throw std::invalid_argument("CUDA attention kernel '" + choice.path +
                                  "' has no tile variant '" + choice.tile + "'");
    if (!entry_of(*path_))
      throw std::logic_error("CudaBackend: kernel path '" + choice.path + "' has no entry points");
    if (entry_of(*path_)->flash_tiles) tile_ = tile->flash;
  }
  picker_ = KernelPicker(Device::Cuda, path_, path_ ? nullptr : choice.policy);
  RBK_CUDA_CHECK(cudaGetDevice(&device_));
  RBK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaBackend::~CudaBackend() {
  // Destructors must not throw: errors here are ignored, the process is tearing down.
  if (stream_) cudaStreamSynchronize(stream_);
  naive_.reset();
  cudnn_.reset();  // before the memory and the stream it uses go
  for (auto& kv : sizes_) cudaFree(kv.first);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const {
  if (path_) return path_->name;
  const KernelPath* headline = auto_headline_path(Device::Cuda);
  return headline ? headline->name : "auto";
}

const CudaBackend::Entry& CudaBackend::entry_of_row(const KernelPath* row) {
  const Entry* e = row ? entry_of(*row) : nullptr;
  if (!e)
    throw std::logic_error(std::string("CudaBackend: no entry points for kernel path '") +
                           (row ? row->name : "auto") + "'");
  return *e;
}

void* CudaBackend::allocate(std::size_t bytes) {
  if (bytes == 0) bytes = 1;  // distinct, releasable pointers for empty buffers
  void* p = nullptr;
  gpu::check_allocation(cudaMalloc(&p, bytes), bytes,
                        "cudaMalloc on GPU " + std::to_string(device_) + " (" + name() +
                            " backend, " + std::to_string(current_) + " bytes already held)",
                        "cudaMalloc");
  sizes_[p] = bytes;
  current_ += bytes;
  if (current_ > peak_) peak_ = current_;
  return p;
}

void CudaBackend::release(void* p) {
  if (!p) return;
  auto it = sizes_.find(p);
  if (it == sizes_.end())
    throw std::invalid_argument("CudaBackend::release: pointer not allocated by this backend");
  RBK_CUDA_CHECK(cudaFree(p));  // synchronises the device: work still using p has finished
  current_ -= it->second;
  sizes_.erase(it);
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  RBK_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  // The caller may reuse its host buffer at once (and it may be pinned): wait for the copy.
  RBK_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  RBK_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  RBK_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(void* dst, const void* src, std::size_t bytes) {
  RBK_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::fill_zero(void* p, std::size_t bytes) {
  RBK_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
}

void CudaBackend::copy_head_chunks(const HeadChunks& c, const HeadTensor& t, bool to_chunks) {
  gpu::copy_head_chunks(c, t, to_chunks, stream_);
}

void CudaBackend::init_forward(float* out, float* lse, std::int64_t rows, int head_dim) {
  gpu::init_forward(out, lse, rows, head_dim, stream_);
}

NaiveAttention& CudaBackend::naive() {
  if (!naive_)
    naive_ = std::make_unique<NaiveAttention>(
        stream_, [this](std::size_t n) { return allocate(n); }, [this](void* p) { release(p); });
  return *naive_;
}

CudnnAttention& CudaBackend::cudnn() {
#ifdef RINGBENCH_HAVE_CUDNN
  if (!cudnn_)
    cudnn_ = std::make_shared<CudnnAttention>(
        stream_, [this](std::size_t n) { return allocate(n); }, [this](void* p) { release(p); });
  return *cudnn_;
#else
  throw std::logic_error("CudaBackend: the cudnn path is not built");
#endif
}

std::int64_t CudaBackend::cudnn_fallback_blocks() const {
#ifdef RINGBENCH_HAVE_CUDNN
  return cudnn_ ? cudnn_->fallback_blocks() : 0;
#else
  return 0;
#endif
}

void CudaBackend::note_fallbacks(std::int64_t before, const char* what) {
#ifdef RINGBENCH_HAVE_CUDNN
  // auto hands such blocks to the flash kernels by design; only an explicit cudnn is told.
  if (path_ == nullptr || fallback_noted_ || cudnn_->fallback_blocks() == before) return;
  fallback_noted_ = true;
  std::fprintf(stderr,
               "ringbench: note: kernel cudnn: a %s block cuDNN cannot take (fp32 data, head "
               "dim not a multiple of 8 up to 128, causal spans with unequal position strides, "
               "or a dilated shape this cuDNN refuses) runs on the flash kernels; further such "
               "blocks are not reported\n",
               what);
#else
  (void)before;
  (void)what;
#endif
}

// The cudnn row hands blocks cuDNN cannot take to the flash kernels: such a block is counted
// where it really ran.
void CudaBackend::forward(const ForwardBlock& block) {
  const KernelPicker::Pick pick = picker_.pick(block.dtype, block.dims, block.pattern);
  const std::int64_t fallbacks = cudnn_fallback_blocks();
  (this->*entry_of_row(pick.row).forward)(block);
  count_block(cudnn_fallback_blocks() > fallbacks ? "flash" : pick.row->name, pick.from_policy);
}

void CudaBackend::backward(const BackwardBlock& block) {
  const KernelPicker::Pick pick = picker_.pick(block.dtype, block.dims, block.pattern);
  const std::int64_t fallbacks = cudnn_fallback_blocks();
  (this->*entry_of_row(pick.row).backward)(block);
  count_block(cudnn_fallback_blocks() > fallbacks ? "flash" : pick.row->name, pick.from_policy);
}

void CudaBackend::forward_flash(const ForwardBlock& block) {
  flash_forward(block, stream_, tile_);
}
void CudaBackend::backward_flash(const BackwardBlock& block) {
  flash_backward(block, stream_, tile_);
}
void CudaBackend::forward_naive(const ForwardBlock& block) {
  naive().forward(block);
}
void CudaBackend::backward_naive(const BackwardBlock& block) {
  naive().backward(block);
}

void CudaBackend::forward_cudnn(const ForwardBlock& block) {
#ifdef RINGBENCH_HAVE_CUDNN
  const std::int64_t before = cudnn().fallback_blocks();
  cudnn_->forward(block);
  note_fallbacks(before, "forward");
#else
  (void)block;
  cudnn();  // throws: the row is not built
#endif
}

void CudaBackend::backward_cudnn(const BackwardBlock& block) {
#ifdef RINGBENCH_HAVE_CUDNN
  const std::int64_t before = cudnn().fallback_blocks();
  // Without backward_prepare for this dO buffer there is no O copy: the block falls back.
  cudnn_->backward(block, output_copy_for(block.dout));
  note_fallbacks(before, "backward");
#else
  (void)block;
  cudnn();
#endif
}

void CudaBackend::backward_prepare(const void* dout, const float* out, float* delta,
                                   std::int64_t rows, int head_dim, DType dtype) {
  gpu::backward_prepare(dout, out, delta, rows, head_dim, dtype, stream_);
  // cuDNN's backward reads O in the data type, not delta. The copy is made by the first cudnn
  // block of this pass (output_copy_for), so passes whose blocks all run elsewhere (auto
  // sending them to flash) pay nothing for it.
  pending_out_ = {out, rows * head_dim, dtype, dtype == DType::F32 ? nullptr : dout};
  out_copy_for_ = nullptr;
}

const void* CudaBackend::output_copy_for(const void* dout) {
  if (dout == nullptr) return nullptr;
  if (dout == out_copy_for_) return out_copy_;
  if (dout != pending_out_.dout)
    return nullptr;  // no backward_prepare for it: the block falls back
  const std::size_t elements = static_cast<std::size_t>(pending_out_.elements);
  const std::size_t bytes = elements * dtype_size(pending_out_.dtype);
  if (bytes > out_copy_bytes_) {
    if (out_copy_) release(out_copy_);
    out_copy_ = nullptr;
    out_copy_bytes_ = 0;
    out_copy_ = allocate(bytes);
    out_copy_bytes_ = bytes;
  }
  convert_from_float(out_copy_, pending_out_.out, elements, pending_out_.dtype, stream_);
  out_copy_for_ = dout;
  return out_copy_;
}

void CudaBackend::accumulate(float* dst, const float* src, std::size_t count) {
  gpu::accumulate(dst, src, count, stream_);
}

int CudaBackend::mark() {
  if (marks_used_ == int(events_.size())) {
    cudaEvent_t e = nullptr;
    RBK_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  RBK_CUDA_CHECK(cudaEventRecord(events_[marks_used_], stream_));
  return marks_used_++;
}

double CudaBackend::seconds_between(int from, int to) {
  if (from < 0 || to < 0 || from >= marks_used_ || to >= marks_used_)
    throw std::out_of_range("CudaBackend::seconds_between: mark id out of range");
  RBK_CUDA_CHECK(cudaEventSynchronize(events_[to]));
  RBK_CUDA_CHECK(cudaEventSynchronize(events_[from]));
  float ms = 0.f;
  RBK_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[from], events_[to]));
  return double(ms) * 1e-3;
}

void CudaBackend::reset_marks() {
  marks_used_ = 0;
}

void CudaBackend::synchronize() {
  RBK_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::unique_ptr<AttentionBackend> make_cuda_backend(const KernelChoice& choice) {
  return std::make_unique<CudaBackend>(choice);
}

std::unique_ptr<AttentionBackend> make_cuda_backend(const std::string& kernel) {
  return make_cuda_backend(KernelChoice{kernel, "default"});
}

namespace {

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string cublas_version_text() {
  return library_version_text([](libraryPropertyType part, int* v) {
    return cublasGetProperty(part, v) == CUBLAS_STATUS_SUCCESS;
  });
}

}  // namespace

std::vector<std::pair<std::string, std::string>> library_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  int v = 0;
  out.emplace_back("CUDA runtime", cudaRuntimeGetVersion(&v) == cudaSuccess
                                       ? cuda_version_text(v)
                                       : std::string("unknown"));
  // No driver installed: the call fails or reports 0.
  v = 0;
  const bool driver = cudaDriverGetVersion(&v) == cudaSuccess && v > 0;
  cudaGetLastError();  // a failed query must not surface in a later check
  out.emplace_back("CUDA driver", driver ? cuda_version_text(v) : std::string("no driver"));
  out.emplace_back("cuBLAS", cublas_version_text());
#ifdef RINGBENCH_HAVE_CUDNN
  out.emplace_back("cuDNN", cudnn_version_text());
#else
  out.emplace_back("cuDNN", "not built");
#endif
  return out;
}

}  // namespace rb::attn::gpu
