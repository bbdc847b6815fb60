#include "profiling/engine.hpp"

#include <algorithm>
#include <stdexcept>

namespace rb::prof {

void Engine::launch(const coll::Call& base, std::size_t iter, std::size_t group) {
  coll::Call c = base;
  const std::size_t total = std::max(c.sizes.send_bytes, c.sizes.recv_bytes);
  const std::size_t steps = total ? bytes_ / total : 1;
  const std::size_t shift = total * (iter % (steps ? steps : 1));
  c.send = static_cast<char*>(c.send) + shift;
  c.recv = static_cast<char*>(c.recv) + shift;
  run(c, group);
}

// The one place that knows which builds have the device engines.
std::unique_ptr<Engine> make_engine(const EngineSetup& setup) {
  if (setup.backend != Backend::Cuda) return make_mpi_engine(setup);
#ifdef RINGBENCH_HAVE_CUDA
  if (!setup.nccl_world)
    throw std::runtime_error("the cuda backend has no world NCCL communicator");
  return make_nccl_engine(setup);
#else
  throw std::runtime_error("the cuda backend needs a build with CUDA and NCCL");
#endif
}

std::unique_ptr<ComputeEngine> make_compute_engine(Backend backend) {
  if (backend != Backend::Cuda) return make_host_compute_engine();
#ifdef RINGBENCH_HAVE_CUDA
  return make_gpu_compute_engine();
#else
  throw std::runtime_error("the cuda backend needs a build with CUDA");
#endif
}

}  // namespace rb::prof
