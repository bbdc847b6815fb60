#pragma once
// The one output file of a run: parallel HDF5 over MPI-IO, created and written by all
// ranks together. Every call here is COLLECTIVE over the file's communicator: all ranks
// call it in the same order with the same names and shapes (values may differ per rank
// only where the function says "per rank"). Handles are RAII (hid_t closed in destructors).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

namespace rb::h5 {

// Units, description and role are on every dataset (the schema promises them).
struct Meta {
  Meta() = default;
  Meta(std::string units_, std::string description_, std::string role_ = "metric")
      : units(std::move(units_)), description(std::move(description_)), role(std::move(role_)) {}

  std::string units;        // "s", "B", "B/s", "TFLOP/s", "FLOP", "Hz", "1" for counts and ratios
  std::string description;  // one sentence
  std::string role =
      "metric";  // "key": says which point or rank a row is; "metric": a measurement;
                 // "dimension": a dimension scale (Group::dimension_scale)
  // What rb-analysis needs to judge a metric, written beside units and role so the analysis
  // never restates it (docs/hdf5-schema.md, "What a column says"). Empty means the default
  // (the writer resolves it, so every metric dataset carries every attribute). Sweeps set these
  // through PointsTable::judging; other writers keep the defaults.
  std::string direction;   // "higher" | "lower" | "none"; default: higher for rates (B/s,
                           // TFLOP/s, Hz), lower for times (s), none otherwise
  std::string judged;      // "headline": compare judges it without --metric; default "no"
  std::string ranks;       // how a point's ranks make its figure: "limiting" (default: the worst
                           // rank, per iteration) | "each" (every rank measures its own device)
  std::string noise;       // run-to-run noise class (rb-analysis verdict.RUN_NOISE): "ring",
                           // "compute", "memory", "p2p_bandwidth", "latency"; default "*"
  std::string inner_axis;  // metrics: the inner axis ("iteration", "step", ...; default "none");
                           // keys: what the key spans ("message_size": --min-bytes applies)
};

// `meta` with every judging default filled in (direction from the units, "no", "limiting", "*",
// "none"), as write_meta writes it.
Meta resolved(const Meta& meta);
// "" when the judging fields hold allowed words, else what is wrong (a programming error).
std::string check_judging(const Meta& meta);

inline constexpr int kSchemaVersion = 4;  // /run schema_version; docs/hdf5-schema.md

class Handle;  // owns one hid_t

class Group {
 public:
  Group() = default;
  Group(std::shared_ptr<Handle> h, MPI_Comm comm, std::string path);

  const std::string& path() const { return path_; }
  bool valid() const { return static_cast<bool>(h_); }
  MPI_Comm comm() const { return comm_; }

  Group group(const std::string& name);        // opens or creates
  bool exists(const std::string& name) const;  // link exists (collective: same answer everywhere)

  // Attributes (collective; rank 0's value is the one written, all ranks must call).
  void attr(const std::string& name, const std::string& value);
  void attr(const std::string& name, const char* value) { attr(name, std::string(value)); }
  void attr(const std::string& name, std::int64_t value);
  void attr(const std::string& name, int value) { attr(name, static_cast<std::int64_t>(value)); }
  void attr(const std::string& name, double value);
  void attr(const std::string& name, const std::vector<std::int64_t>& values);
  void attr(const std::string& name, const std::vector<double>& values);
  // Overwrites an existing string attribute (used for /run status).
  void set_attr(const std::string& name, const std::string& value);

  // Per rank: each rank passes its own block of `row_dims` shape (same shape on every rank,
  // checked); the dataset is [world_size, row_dims...] and rank r's block lands at index r.
  // T: double or std::int64_t, the numbers a dataset holds (h5_write.cpp defines these two).
  template <class T>
  void write_per_rank(const std::string& name, const std::vector<T>& row,
                      const std::vector<std::uint64_t>& row_dims, const Meta& meta);
  // One value per rank: dataset [world_size].
  void write_per_rank(const std::string& name, double value, const Meta& meta);
  void write_per_rank(const std::string& name, std::int64_t value, const Meta& meta);
  void write_per_rank_string(const std::string& name, const std::string& value, const Meta& meta);
  // Per rank, several strings: dataset [world_size, row.size()] (same count on every rank).
  void write_per_rank_strings(const std::string& name, const std::vector<std::string>& row,
                              const Meta& meta);

  // Scattered per rank: a dataset of shape `dims` = [rows, points, inner...] of which this rank
  // writes the cells (row, point) in `cells`, one block of the inner shape each, in `values`
  // cell after cell (any order). No two ranks name the same cell; a cell nobody names keeps the
  // fill value (0, "" for text: the caller names every cell it means). `dims` must agree.
  struct Cell {
    std::uint64_t row = 0, point = 0;
  };
  void write_cells(const std::string& name, const std::vector<double>& values,
                   const std::vector<Cell>& cells, const std::vector<std::uint64_t>& dims,
                   const Meta& meta);
  void write_cells(const std::string& name, const std::vector<std::int64_t>& values,
                   const std::vector<Cell>& cells, const std::vector<std::uint64_t>& dims,
                   const Meta& meta);
  // Text cells of a [rows, points] dataset, one string per cell, as wide as the longest.
  void write_cell_strings(const std::string& name, const std::vector<std::string>& values,
                          const std::vector<Cell>& cells, const std::vector<std::uint64_t>& dims,
                          const Meta& meta);

  // Shared: the same array on every rank (rank 0 writes it); `dims` gives the shape.
  template <class T>  // double or std::int64_t
  void write_shared(const std::string& name, const std::vector<T>& data,
                    const std::vector<std::uint64_t>& dims, const Meta& meta);
  void write_shared_strings(const std::string& name, const std::vector<std::string>& data,
                            const Meta& meta);

  // Dimension scales (H5DS): they name a dataset's axes, so xarray (h5netcdf), netCDF and h5py
  // read the file with dimension names ("rank", "point", "iteration") instead of phony ones.
  // dimension_scale: a 1-D int64 dataset `name` of 0 .. size-1 (units "1", role "dimension")
  // made the scale of dimension `name`; mark_scale: an existing 1-D dataset made the scale of
  // the dimension it is named after (it keeps its role). attach_scales: axis i of dataset
  // `dataset` gets the scale scales[i] (a path from this group, or absolute) and its name as
  // the axis label; the number of scales must be the dataset's rank. Collective: every rank
  // makes the same calls.
  void dimension_scale(const std::string& name, std::uint64_t size, const std::string& description);
  void mark_scale(const std::string& dataset);
  void attach_scales(const std::string& dataset, const std::vector<std::string>& scales);
  // The datasets directly in this group, by name (the same list on every rank).
  std::vector<std::string> dataset_names() const;

 private:
  template <class T>
  void cells_of(const std::string& name, const std::vector<T>& values,
                const std::vector<Cell>& cells, const std::vector<std::uint64_t>& dims,
                const Meta& meta);

  std::shared_ptr<Handle> h_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string path_;
};

// How the output file meets the parallel file system (run.mpiio_hints, run.alignment_bytes in
// the config; docs/multi-node.md): MPI-IO hints passed to MPI_File_open through HDF5
// (striping_factor, striping_unit, cb_nodes, romio_cb_write, ...; an MPI library ignores the
// ones it does not know), and the alignment of every object of at least that size (0: HDF5's
// default, packed), e.g. the stripe size so that no rank's block straddles two stripes.
struct IoHints {
  std::vector<std::pair<std::string, std::string>> mpiio;
  std::uint64_t alignment_bytes = 0;
};

class File {
 public:
  // Collective. Creates `path` (parent directories too) through MPI-IO; all ranks agree on
  // every refusal (std::runtime_error with the message):
  // - an existing file, or a symbolic link (dangling or not), unless `force`; a directory, a
  //   FIFO, a device or a socket, even with `force` (only a regular file or a link is replaced);
  //   `path` being the file `protect` names (the config); a path MPI-IO cannot take;
  // - a new `path` is claimed with O_EXCL: of two runs racing for it, one is refused;
  // - with `force` over an existing file or link the data goes to a temporary name beside it
  //   (pending()), renamed over `path` by close() once the file is whole, so a run that stops
  //   before (a full disk, a signal, a kill) leaves the old file as it was; a File destroyed
  //   without close() leaves it too; a link is replaced itself, never its target;
  // - every rank must read back what rank 0 wrote into the claimed file (one file system
  //   shared by all nodes), else the rank and host that cannot are named.
  static File create(const std::string& path, MPI_Comm comm, bool force,
                     const std::string& protect = "", const IoHints& hints = {});
  // Read-only open (collective), used by tests and by readers in C++.
  static File open_read(const std::string& path, MPI_Comm comm);

  File() = default;
  ~File();
  File(File&&) noexcept;
  File& operator=(File&&) noexcept;

  Group root();
  void flush();  // H5Fflush (collective): everything written so far survives a crash after this
  // Collective; renames a --force run's file over the old one (see create). replace_old_file
  // false (a run stopped early by a signal): the old file stays, the new one is closed under
  // pending() for the caller to remove.
  void close(bool replace_old_file = true);
  const std::string& path() const { return path_; }
  // Where the data goes until close() renames it over path(): a --force run's temporary name
  // (app/ removes it when the run stops early); "" when the file is written at path() itself.
  const std::string& pending() const { return pending_; }
  // The MPI-IO hints in effect on the open file, as the MPI library reports them
  // (MPI_File_get_info): the run's requested hints it kept and its own defaults.
  std::vector<std::pair<std::string, std::string>> mpiio_hints_in_effect() const;

 private:
  void replace_old();
  void close_file(bool replace);
  void check_on_disk() const;

  std::shared_ptr<Handle> file_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string path_;
  std::string pending_;  // the temporary name the data is written to until replace_old()
};

// Read helpers for tests and small tools (collective open not needed: serial read on the caller).
std::vector<double> read_doubles(const std::string& file, const std::string& dataset,
                                 std::vector<std::uint64_t>* dims = nullptr);
std::vector<std::int64_t> read_ints(const std::string& file, const std::string& dataset,
                                    std::vector<std::uint64_t>* dims = nullptr);
std::vector<std::string> read_strings(const std::string& file, const std::string& dataset);
std::string read_string_attr(const std::string& file, const std::string& object,
                             const std::string& attr);
// Numeric attributes (scalar or 1-D) of any integer / floating type, converted.
std::vector<std::int64_t> read_int_attr(const std::string& file, const std::string& object,
                                        const std::string& attr);
std::vector<double> read_double_attr(const std::string& file, const std::string& object,
                                     const std::string& attr);

// Where a contiguous dataset's data starts in the file (bytes), to check the alignment.
std::uint64_t dataset_offset(const std::string& file, const std::string& dataset);

// The HDF5 library this process runs with ("1.10.8"), for the run's provenance.
std::string library_version();

}  // namespace rb::h5
