#pragma once
// The kernels and ring transports of each compute path, handed to sweeps through the run
// context: the only place that knows which factories a build has.
#include "config/config.hpp"
#include "sweeps/sweep.hpp"

namespace rb {

// backend: the resolved path (Host or Cuda; Cuda only in builds that have it).
PathFactories make_path_factories(Backend backend);

}  // namespace rb
