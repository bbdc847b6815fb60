// Parallel HDF5 writes (C API only): groups, attributes, per-rank and shared datasets. Every
// public call is collective over the file's communicator; values that must be identical on
// every rank (attribute values, shapes of shared data) are broadcast from rank 0 first, because
// parallel HDF5 silently corrupts the file when ranks disagree on metadata. Shape mismatches
// between ranks are detected with a reduction BEFORE any HDF5 call, so every rank throws
// instead of some ranks hanging.
#include "metrics/h5.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "metrics/h5_detail.hpp"

namespace rb::h5 {
using namespace detail;

namespace {

using mpi::any_rank;

Id collective_dxpl(const std::string& object) {
  Id dxpl(check_id(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate", object), H5Pclose);
  check(H5Pset_dxpl_mpio(*dxpl, H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio", object);
  return dxpl;
}

// Removes `name` from `obj` if it exists, so that the attribute can be written anew.
void delete_attr_if_exists(hid_t obj, const std::string& name, const std::string& object) {
  const htri_t e = H5Aexists(obj, name.c_str());
  check(e, "H5Aexists", object + "@" + name);
  if (e > 0) check(H5Adelete(obj, name.c_str()), "H5Adelete", object + "@" + name);
}

void refuse_existing_attr(hid_t obj, const std::string& name, const std::string& object) {
  const htri_t e = H5Aexists(obj, name.c_str());
  check(e, "H5Aexists", object + "@" + name);
  if (e > 0)
    throw std::runtime_error("attribute '" + name + "' already exists on '" + object +
                             "' (use set_attr to overwrite it)");
}

// Every rank passes the same (broadcast) value: HDF5 requires identical attribute data.
void write_string_attr(hid_t obj, const std::string& object, const std::string& name,
                       std::string value, MPI_Comm comm) {
  mpi::broadcast_string(value, comm);
  const std::string where = object + "@" + name;
  Id type = vl_utf8_type(where);
  Id space(check_id(H5Screate(H5S_SCALAR), "H5Screate", where), H5Sclose);
  Id attr(check_id(H5Acreate2(obj, name.c_str(), *type, *space, H5P_DEFAULT, H5P_DEFAULT),
                   "H5Acreate2", where),
          H5Aclose);
  const char* p = value.c_str();
  check(H5Awrite(*attr, *type, &p), "H5Awrite", where);
}

template <class T>
void write_numeric_attr(hid_t obj, const std::string& object, const std::string& name,
                        std::vector<T> values, bool scalar, MPI_Comm comm) {
  bcast_vector(values, comm);
  const std::string where = object + "@" + name;
  Id space = scalar ? simple_space({}, where) : simple_space({values.size()}, where);
  Id attr(check_id(H5Acreate2(obj, name.c_str(), h5_type<T>(), *space, H5P_DEFAULT, H5P_DEFAULT),
                   "H5Acreate2", where),
          H5Aclose);
  if (!values.empty()) check(H5Awrite(*attr, h5_type<T>(), values.data()), "H5Awrite", where);
}

void check_meta(const std::string& dataset, const Meta& meta) {
  if (meta.units.empty() || meta.description.empty())
    throw std::runtime_error("dataset '" + dataset +
                             "' needs non-empty units and description (got units '" + meta.units +
                             "', description '" + meta.description + "')");
  const std::string judging = check_judging(meta);
  if (!judging.empty()) throw std::runtime_error("dataset '" + dataset + "': " + judging);
  if (meta.role != "key" && meta.role != "metric" && meta.role != "dimension")
    throw std::runtime_error("dataset '" + dataset +
                             "': role must be 'key', 'metric' or "
                             "'dimension', not '" +
                             meta.role + "'");
}

void write_meta(hid_t dset, const std::string& dataset, const Meta& meta, MPI_Comm comm) {
  write_string_attr(dset, dataset, "units", meta.units, comm);
  write_string_attr(dset, dataset, "description", meta.description, comm);
  write_string_attr(dset, dataset, "role", meta.role, comm);
  if (meta.role == "key" && !meta.inner_axis.empty())
    write_string_attr(dset, dataset, "axis", meta.inner_axis, comm);
  if (meta.role != "metric") return;
  const Meta m = resolved(meta);
  write_string_attr(dset, dataset, "direction", m.direction, comm);
  write_string_attr(dset, dataset, "judged", m.judged, comm);
  write_string_attr(dset, dataset, "ranks", m.ranks, comm);
  write_string_attr(dset, dataset, "noise", m.noise, comm);
  write_string_attr(dset, dataset, "inner_axis", m.inner_axis, comm);
}

std::shared_ptr<Handle> create_dataset(hid_t parent, const std::string& name,
                                       const std::string& dataset, hid_t type,
                                       const std::vector<std::uint64_t>& dims) {
  Id space = simple_space(dims, dataset);
  return shared(check_id(H5Dcreate2(parent, name.c_str(), type, *space, H5P_DEFAULT, H5P_DEFAULT,
                                    H5P_DEFAULT),
                         "H5Dcreate2", dataset),
                H5Dclose);
}

// Every rank must hold a row of the same shape; checked with one reduction so all ranks
// agree on the verdict (a mismatch discovered inside HDF5 would hang or corrupt the file).
void check_same_row_shape(const std::string& dataset, std::size_t elements,
                          const std::vector<std::uint64_t>& row_dims, MPI_Comm comm) {
  const bool size_ok = product(row_dims) == elements;
  // [ndims, size_bad] reduced with MIN and MAX in one go (negated for MIN).
  std::int64_t local[4] = {static_cast<std::int64_t>(row_dims.size()), size_ok ? 0 : 1,
                           -static_cast<std::int64_t>(row_dims.size()), 0};
  std::int64_t global[4];
  MPI_Allreduce(local, global, 4, MPI_INT64_T, MPI_MAX, comm);
  const std::int64_t max_nd = global[0], min_nd = -global[2];
  if (global[1] != 0) {
    throw std::runtime_error("per-rank dataset '" + dataset + "': " +
                             (size_ok ? std::string("another rank's")
                                      : "this rank's (" + std::to_string(elements) + " values)") +
                             " row does not match its shape; this rank's shape is " +
                             shape_text(row_dims));
  }
  if (min_nd != max_nd) {
    throw std::runtime_error("per-rank dataset '" + dataset +
                             "': ranks disagree on the row's number of dimensions (from " +
                             std::to_string(min_nd) + " to " + std::to_string(max_nd) +
                             "); this rank's shape is " + shape_text(row_dims));
  }
  const std::size_t nd = row_dims.size();
  if (nd == 0) return;
  std::vector<std::uint64_t> mx(nd), mn(nd);
  MPI_Allreduce(row_dims.data(), mx.data(), static_cast<int>(nd), MPI_UINT64_T, MPI_MAX, comm);
  MPI_Allreduce(row_dims.data(), mn.data(), static_cast<int>(nd), MPI_UINT64_T, MPI_MIN, comm);
  if (mx != mn) {
    throw std::runtime_error("per-rank dataset '" + dataset +
                             "': ranks passed rows of different shapes (smallest " +
                             shape_text(mn) + ", largest " + shape_text(mx) + "; this rank " +
                             shape_text(row_dims) + "); every rank must pass the same shape");
  }
}

void collective_write(hid_t dset, hid_t mem_type, hid_t mspace, hid_t fspace, const void* buf,
                      const std::string& dataset, MPI_Comm comm) {
  Id dxpl = collective_dxpl(dataset);
  agreed(comm,
         [&] { check(H5Dwrite(dset, mem_type, mspace, fspace, *dxpl, buf), "H5Dwrite", dataset); });
  const haddr_t offset = H5Dget_offset(dset);  // HADDR_UNDEF unless contiguous and allocated
  if (offset != HADDR_UNDEF)
    written_end() = std::max<std::uint64_t>(written_end(), offset + H5Dget_storage_size(dset));
}

// Collective: rank `rank` writes its `count` values (the row [rank, ...] of a dataset of
// shape `dims`). Every rank has the same count (checked by the caller); a zero-sized dataset
// has nothing to write.
void write_rank_row(hid_t dset, hid_t mem_type, const std::vector<std::uint64_t>& dims, int rank,
                    std::size_t count, const void* buf, const std::string& dataset, MPI_Comm comm) {
  if (count == 0) return;
  Id fspace(check_id(H5Dget_space(dset), "H5Dget_space", dataset), H5Sclose);
  std::vector<hsize_t> start(dims.size(), 0), extent(dims.begin(), dims.end());
  start[0] = static_cast<hsize_t>(rank);
  extent[0] = 1;
  check(H5Sselect_hyperslab(*fspace, H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr),
        "H5Sselect_hyperslab", dataset);
  Id mspace = simple_space({count}, dataset);
  collective_write(dset, mem_type, *mspace, *fspace, buf, dataset, comm);
}

// A [world, row_dims...] dataset of `type` holding each rank's `count` values at its row.
void per_rank_rows(hid_t parent, const std::string& name, const std::string& dataset, hid_t type,
                   std::size_t count, const void* buf, const std::vector<std::uint64_t>& row_dims,
                   const Meta& meta, MPI_Comm comm) {
  check_meta(dataset, meta);
  check_same_row_shape(dataset, count, row_dims, comm);
  std::vector<std::uint64_t> dims{static_cast<std::uint64_t>(mpi::size_of(comm))};
  dims.insert(dims.end(), row_dims.begin(), row_dims.end());
  auto dset = create_dataset(parent, name, dataset, type, dims);
  write_rank_row(dset->id(), type, dims, mpi::rank_of(comm), count, buf, dataset, comm);
  write_meta(dset->id(), dataset, meta, comm);
}

template <class T>
void per_rank_impl(hid_t parent, const std::string& name, const std::string& dataset,
                   const std::vector<T>& row, const std::vector<std::uint64_t>& row_dims,
                   const Meta& meta, MPI_Comm comm) {
  per_rank_rows(parent, name, dataset, h5_type<T>(), row.size(), row.data(), row_dims, meta, comm);
}

// Rank 0 writes the whole extent, the others take part in the collective call with empty
// selections. `buf` is only read on rank 0.
void write_from_rank0(hid_t dset, hid_t mem_type, const void* buf, const std::string& dataset,
                      MPI_Comm comm) {
  Id fspace(check_id(H5Dget_space(dset), "H5Dget_space", dataset), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(*fspace);
  check(static_cast<herr_t>(n < 0 ? -1 : 0), "H5Sget_simple_extent_npoints", dataset);
  if (n == 0) return;
  Id mspace = simple_space({static_cast<std::uint64_t>(n)}, dataset);
  if (mpi::rank_of(comm) != 0) {
    check(H5Sselect_none(*fspace), "H5Sselect_none", dataset);
    check(H5Sselect_none(*mspace), "H5Sselect_none", dataset);
  }
  collective_write(dset, mem_type, *mspace, *fspace, buf, dataset, comm);
}

template <class T>
void shared_impl(hid_t parent, const std::string& name, const std::string& dataset,
                 const std::vector<T>& data, const std::vector<std::uint64_t>& dims_in,
                 const Meta& meta, MPI_Comm comm) {
  check_meta(dataset, meta);
  // Rank 0's shape is the file's; a rank whose data disagrees is an error on every rank.
  std::vector<std::uint64_t> dims = dims_in;
  bcast_vector(dims, comm);
  const bool bad = dims != dims_in || product(dims_in) != data.size();
  if (any_rank(bad, comm))
    throw std::runtime_error(
        "shared dataset '" + dataset + "': every rank must pass the same shape and " +
        "matching data (rank 0's shape " + shape_text(dims) + ", this rank's " +
        shape_text(dims_in) + " with " + std::to_string(data.size()) + " values)");
  auto dset = create_dataset(parent, name, dataset, h5_type<T>(), dims);
  write_from_rank0(dset->id(), h5_type<T>(), data.data(), dataset, comm);
  write_meta(dset->id(), dataset, meta, comm);
}

// Rank 0's `dims` for every rank: a rank whose shape disagrees is an error on every rank.
std::vector<std::uint64_t> agreed_dims(const std::vector<std::uint64_t>& mine,
                                       const std::string& dataset, MPI_Comm comm) {
  std::vector<std::uint64_t> dims = mine;
  bcast_vector(dims, comm);
  if (any_rank(dims != mine || dims.size() < 2, comm))
    throw std::runtime_error("cell dataset '" + dataset + "': every rank must pass the same " +
                             "[rows, points, ...] shape (rank 0's " + shape_text(dims) +
                             ", this rank's " + shape_text(mine) + ")");
  return dims;
}

// The order HDF5 walks a selection in (row-major): the cells sorted by row, then point.
std::vector<std::size_t> walk_order(const std::vector<Group::Cell>& cells) {
  std::vector<std::size_t> order(cells.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::make_pair(cells[a].row, cells[a].point) <
           std::make_pair(cells[b].row, cells[b].point);
  });
  return order;
}

// Collective: this rank's blocks (already in walk order) at its cells of a [rows, points,
// inner...] dataset; ranks without cells take part with empty selections.
void write_cell_blocks(hid_t dset, hid_t mem_type, const std::vector<std::uint64_t>& dims,
                       const std::vector<Group::Cell>& sorted, const void* buf,
                       const std::string& dataset, MPI_Comm comm) {
  if (product(dims) == 0) return;
  const std::uint64_t block = product(std::vector<std::uint64_t>(dims.begin() + 2, dims.end()));
  Id fspace(check_id(H5Dget_space(dset), "H5Dget_space", dataset), H5Sclose);
  Id mspace = simple_space({std::max<std::uint64_t>(1, sorted.size() * block)}, dataset);
  std::vector<hsize_t> start(dims.size(), 0), count(dims.begin(), dims.end());
  count[0] = count[1] = 1;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    start[0] = sorted[i].row;
    start[1] = sorted[i].point;
    check(H5Sselect_hyperslab(*fspace, i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(),
                              nullptr, count.data(), nullptr),
          "H5Sselect_hyperslab", dataset);
  }
  if (sorted.empty()) {
    check(H5Sselect_none(*fspace), "H5Sselect_none", dataset);
    check(H5Sselect_none(*mspace), "H5Sselect_none", dataset);
  }
  collective_write(dset, mem_type, *mspace, *fspace, buf, dataset, comm);
}

// `values` (one block per cell, in the cells' order) rearranged into walk order.
template <class T>
std::vector<T> in_walk_order(const std::vector<T>& values, const std::vector<std::size_t>& order,
                             std::size_t block, const std::string& dataset) {
  if (values.size() != order.size() * block)
    throw std::logic_error("cell dataset '" + dataset + "': " + std::to_string(values.size()) +
                           " values for " + std::to_string(order.size()) + " cells of " +
                           std::to_string(block));
  std::vector<T> out;
  out.reserve(values.size());
  for (std::size_t i : order)
    out.insert(out.end(), values.begin() + static_cast<std::ptrdiff_t>(i * block),
               values.begin() + static_cast<std::ptrdiff_t>((i + 1) * block));
  return out;
}

// Packs strings into fixed-width cells (NUL padded) for a fixed-length string dataset.
std::vector<char> pack_fixed(const std::vector<std::string>& strings, std::size_t width) {
  std::vector<char> buf(strings.size() * width, '\0');
  for (std::size_t i = 0; i < strings.size(); ++i)
    std::memcpy(buf.data() + i * width, strings[i].data(), strings[i].size());
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Group

Group::Group(std::shared_ptr<Handle> h, MPI_Comm comm, std::string path)
    : h_(std::move(h)), comm_(comm), path_(std::move(path)) {}

static void require_valid(const std::shared_ptr<Handle>& h, const std::string& what) {
  if (!h) throw std::runtime_error("HDF5 group used before it was opened (" + what + ")");
}

bool Group::exists(const std::string& name) const {
  require_valid(h_, "exists " + name);
  // Walk the path one link at a time: H5Lexists fails (instead of answering false) when an
  // intermediate group is missing.
  bool found = true;
  std::string prefix;
  std::size_t pos = 0;
  while (found && pos <= name.size()) {
    std::size_t slash = name.find('/', pos);
    if (slash == std::string::npos) slash = name.size();
    prefix = name.substr(0, slash);
    if (!prefix.empty() && slash > pos) {
      const htri_t e = H5Lexists(h_->id(), prefix.c_str(), H5P_DEFAULT);
      check(e, "H5Lexists", join_path(path_, prefix));
      found = e > 0;
    }
    pos = slash + 1;
  }
  // Collective metadata reads give every rank the same answer; verify, since a disagreement
  // would make the next collective call hang.
  int in[2] = {found ? 1 : 0, found ? -1 : 0}, out[2];
  MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, comm_);
  if (out[0] != -out[1])
    throw std::runtime_error("ranks disagree on whether '" + join_path(path_, name) + "' exists");
  return found;
}

Group Group::group(const std::string& name) {
  require_valid(h_, "group " + name);
  const std::string path = join_path(path_, name);
  hid_t id;
  if (exists(name)) {
    id = check_id(H5Gopen2(h_->id(), name.c_str(), H5P_DEFAULT), "H5Gopen2", path);
  } else {
    Id lcpl(check_id(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate", path), H5Pclose);
    check(H5Pset_create_intermediate_group(*lcpl, 1), "H5Pset_create_intermediate_group", path);
    id = check_id(H5Gcreate2(h_->id(), name.c_str(), *lcpl, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2",
                  path);
  }
  return Group(shared(id, H5Gclose), comm_, path);
}

void Group::attr(const std::string& name, const std::string& value) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_string_attr(h_->id(), path_, name, value, comm_);
}

void Group::attr(const std::string& name, std::int64_t value) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_numeric_attr<std::int64_t>(h_->id(), path_, name, {value}, true, comm_);
}

void Group::attr(const std::string& name, double value) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_numeric_attr<double>(h_->id(), path_, name, {value}, true, comm_);
}

void Group::attr(const std::string& name, const std::vector<std::int64_t>& values) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_numeric_attr<std::int64_t>(h_->id(), path_, name, values, false, comm_);
}

void Group::attr(const std::string& name, const std::vector<double>& values) {
  require_valid(h_, "attr " + name);
  refuse_existing_attr(h_->id(), name, path_);
  write_numeric_attr<double>(h_->id(), path_, name, values, false, comm_);
}

void Group::set_attr(const std::string& name, const std::string& value) {
  require_valid(h_, "set_attr " + name);
  delete_attr_if_exists(h_->id(), name, path_);
  write_string_attr(h_->id(), path_, name, value, comm_);
}

// Defined here for the two number types a dataset holds: HDF5 stays out of the header.
template <class T>
void Group::write_per_rank(const std::string& name, const std::vector<T>& row,
                           const std::vector<std::uint64_t>& row_dims, const Meta& meta) {
  require_valid(h_, name);
  per_rank_impl(h_->id(), name, join_path(path_, name), row, row_dims, meta, comm_);
}
template <class T>
void Group::write_shared(const std::string& name, const std::vector<T>& data,
                         const std::vector<std::uint64_t>& dims, const Meta& meta) {
  require_valid(h_, name);
  shared_impl(h_->id(), name, join_path(path_, name), data, dims, meta, comm_);
}
template void Group::write_per_rank(const std::string&, const std::vector<double>&,
                                    const std::vector<std::uint64_t>&, const Meta&);
template void Group::write_per_rank(const std::string&, const std::vector<std::int64_t>&,
                                    const std::vector<std::uint64_t>&, const Meta&);
template void Group::write_shared(const std::string&, const std::vector<double>&,
                                  const std::vector<std::uint64_t>&, const Meta&);
template void Group::write_shared(const std::string&, const std::vector<std::int64_t>&,
                                  const std::vector<std::uint64_t>&, const Meta&);

void Group::write_per_rank(const std::string& name, double value, const Meta& meta) {
  write_per_rank<double>(name, {value}, {}, meta);
}
void Group::write_per_rank(const std::string& name, std::int64_t value, const Meta& meta) {
  write_per_rank<std::int64_t>(name, {value}, {}, meta);
}
template <class T>
void Group::cells_of(const std::string& name, const std::vector<T>& values,
                     const std::vector<Cell>& cells, const std::vector<std::uint64_t>& dims,
                     const Meta& meta) {
  require_valid(h_, name);
  const std::string dataset = join_path(path_, name);
  check_meta(dataset, meta);
  const std::vector<std::uint64_t> shape = agreed_dims(dims, dataset, comm_);
  const std::vector<std::size_t> order = walk_order(cells);
  std::vector<Cell> sorted;
  for (std::size_t i : order) sorted.push_back(cells[i]);
  const std::size_t block = product(std::vector<std::uint64_t>(shape.begin() + 2, shape.end()));
  const std::vector<T> buf = in_walk_order(values, order, block, dataset);
  auto dset = create_dataset(h_->id(), name, dataset, h5_type<T>(), shape);
  write_cell_blocks(dset->id(), h5_type<T>(), shape, sorted, buf.data(), dataset, comm_);
  write_meta(dset->id(), dataset, meta, comm_);
}

void Group::write_cells(const std::string& name, const std::vector<double>& values,
                        const std::vector<Cell>& cells, const std::vector<std::uint64_t>& dims,
                        const Meta& meta) {
  cells_of(name, values, cells, dims, meta);
}
void Group::write_cells(const std::string& name, const std::vector<std::int64_t>& values,
                        const std::vector<Cell>& cells, const std::vector<std::uint64_t>& dims,
                        const Meta& meta) {
  cells_of(name, values, cells, dims, meta);
}

namespace {

// Parallel HDF5 cannot write variable-length data collectively, so string columns are
// fixed-length, as wide as the longest value over ranks. `row_dims` empty: one string per rank.
void per_rank_strings_impl(hid_t parent, const std::string& name, const std::string& dataset,
                           const std::vector<std::string>& row,
                           const std::vector<std::uint64_t>& row_dims, const Meta& meta,
                           MPI_Comm comm) {
  std::uint64_t local = 1, width = 0;
  for (const auto& s : row) local = std::max<std::uint64_t>(local, s.size());
  MPI_Allreduce(&local, &width, 1, MPI_UINT64_T, MPI_MAX, comm);
  Id type = fixed_utf8_type(width, dataset);
  const std::vector<char> cells = pack_fixed(row, width);
  per_rank_rows(parent, name, dataset, *type, row.size(), cells.data(), row_dims, meta, comm);
}

}  // namespace

void Group::write_per_rank_string(const std::string& name, const std::string& value,
                                  const Meta& meta) {
  require_valid(h_, name);
  per_rank_strings_impl(h_->id(), name, join_path(path_, name), {value}, {}, meta, comm_);
}

void Group::write_per_rank_strings(const std::string& name, const std::vector<std::string>& row,
                                   const Meta& meta) {
  require_valid(h_, name);
  per_rank_strings_impl(h_->id(), name, join_path(path_, name), row, {row.size()}, meta, comm_);
}

void Group::write_cell_strings(const std::string& name, const std::vector<std::string>& values,
                               const std::vector<Cell>& cells,
                               const std::vector<std::uint64_t>& dims, const Meta& meta) {
  require_valid(h_, name);
  const std::string dataset = join_path(path_, name);
  check_meta(dataset, meta);
  const std::vector<std::uint64_t> shape = agreed_dims(dims, dataset, comm_);
  std::uint64_t local = 1, width = 0;
  for (const auto& v : values) local = std::max<std::uint64_t>(local, v.size());
  MPI_Allreduce(&local, &width, 1, MPI_UINT64_T, MPI_MAX, comm_);
  const std::vector<std::size_t> order = walk_order(cells);
  std::vector<Cell> sorted;
  for (std::size_t i : order) sorted.push_back(cells[i]);
  const std::vector<char> buf = pack_fixed(in_walk_order(values, order, 1, dataset), width);
  Id type = fixed_utf8_type(width, dataset);
  auto dset = create_dataset(h_->id(), name, dataset, *type, shape);
  write_cell_blocks(dset->id(), *type, shape, sorted, buf.data(), dataset, comm_);
  write_meta(dset->id(), dataset, meta, comm_);
}

void Group::write_shared_strings(const std::string& name, const std::vector<std::string>& data,
                                 const Meta& meta) {
  require_valid(h_, name);
  const std::string dataset = join_path(path_, name);
  check_meta(dataset, meta);
  // Rank 0's list decides count and width; others only need to agree on the count.
  std::uint64_t hdr[2] = {data.size(), 1};
  for (const auto& s : data) hdr[1] = std::max<std::uint64_t>(hdr[1], s.size());
  MPI_Bcast(hdr, 2, MPI_UINT64_T, 0, comm_);
  if (any_rank(hdr[0] != data.size(), comm_))
    throw std::runtime_error("shared string dataset '" + dataset +
                             "': every rank must pass the same " + "list (rank 0 has " +
                             std::to_string(hdr[0]) + " strings, this rank " +
                             std::to_string(data.size()) + ")");
  Id type = fixed_utf8_type(hdr[1], dataset);
  auto dset = create_dataset(h_->id(), name, dataset, *type, {hdr[0]});
  const std::vector<char> buf =
      mpi::rank_of(comm_) == 0 ? pack_fixed(data, hdr[1]) : std::vector<char>();
  write_from_rank0(dset->id(), *type, buf.data(), dataset, comm_);
  write_meta(dset->id(), dataset, meta, comm_);
}

}  // namespace rb::h5
