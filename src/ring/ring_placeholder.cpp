// placeholder until the ring attention sources land; remove from CMakeLists then
