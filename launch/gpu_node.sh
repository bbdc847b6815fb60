# Shared start of the scripts that run on a GPU node from a bundle made by
# launch/device_bundle.sh (gpu_node_check.sh, perf_node.sh). Such a node has MPI, CUDA and NCCL
# but perhaps nothing else, so it takes only the MPI environment from the shared setup: it
# builds and installs nothing (run_common.sh would).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# rb_gpu_node_start OUT_DIR: the output folder, created, and the environment of every step.
rb_gpu_node_start() {
  mkdir -p "$1"
  rb_mpi_env
  # NVLink multicast stays off unless asked for: the numbers in docs/performance.md were taken
  # without it, and a run here should be comparable with them.
  export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
}
