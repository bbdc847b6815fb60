#pragma once
// The run's HDF5 file: its name, what must not stand in its way (the --json path, another run's
// lock, foreign files beside it), claiming it, and the /run and /ranks groups written before
// the first sweep.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

#include "app/cli.hpp"
#include "app/file_write.hpp"
#include "app/policies.hpp"
#include "app/rank_setup.hpp"
#include "app/validation.hpp"
#include "metrics/h5.hpp"

namespace rb {

// --output, or <run.output_dir>/<run.name>_<rank 0's UTC time>.h5 on every rank.
std::string output_path(const CommandLine& cli, const Config& c, MPI_Comm world);

// Every check before the output is claimed, agreed over the ranks: neither the output nor the
// --json path is one of the run's `inputs` besides the config (its policy files), the --json
// path, rank 0's lock on the output (held in `lock` for the whole run) and the files beside it
// (`heartbeat`: the hang guard will write one). True when the run must stop (every rank said
// why).
bool output_refused(const CommandLine& cli, const std::string& out_path,
                    const std::vector<InputFile>& inputs, bool heartbeat,
                    std::unique_ptr<OutputLock>& lock, MPI_Comm world);

// Claims the output and writes /run (status 'running') and /ranks, flushed; nullopt after
// every rank said why it could not claim it. A write that fails stops the run (MPI_Abort).
std::optional<h5::File> create_output(const std::string& out_path, const Validated& v,
                                      const CommandLine& cli, const std::string& text,
                                      const RankLayout& layout, const RankSetup& s,
                                      int mpi_thread_level, MPI_Comm world);

}  // namespace rb
