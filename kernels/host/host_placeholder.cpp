// placeholder until the host kernels land; remove from CMakeLists then
