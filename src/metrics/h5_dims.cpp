// Dimension scales (HDF5's high-level H5DS API): the names of a dataset's axes, as netCDF-4
// writes them, so xarray and h5netcdf open a sweep group with real dimension names. Each call
// writes attributes (CLASS, NAME, REFERENCE_LIST on the scale; DIMENSION_LIST, DIMENSION_LABELS
// on the dataset): metadata that parallel HDF5 needs every rank to write alike, which the
// callers guarantee by making the same calls with the same names on every rank.
#include <hdf5_hl.h>

#include <numeric>

#include "metrics/h5.hpp"
#include "metrics/h5_detail.hpp"

namespace rb::h5 {
using namespace detail;

namespace {

Id open_dataset(hid_t parent, const std::string& name, const std::string& path) {
  return Id(check_id(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), "H5Dopen2", path), H5Dclose);
}

std::string base_name(const std::string& path) {
  return path.substr(path.find_last_of('/') + 1);
}

}  // namespace

void Group::dimension_scale(const std::string& name, std::uint64_t size,
                            const std::string& description) {
  if (!h_) throw std::runtime_error("HDF5 group used before it was opened (scale " + name + ")");
  std::vector<std::int64_t> index(size);
  std::iota(index.begin(), index.end(), std::int64_t{0});
  write_shared(name, index, {size}, Meta{"1", description, "dimension"});
  mark_scale(name);
}

void Group::mark_scale(const std::string& dataset) {
  if (!h_) throw std::runtime_error("HDF5 group used before it was opened (scale " + dataset + ")");
  const std::string path = join_path(path_, dataset);
  Id scale = open_dataset(h_->id(), dataset, path);
  check(H5DSset_scale(*scale, base_name(dataset).c_str()), "H5DSset_scale", path);
}

std::vector<std::string> Group::dataset_names() const {
  if (!h_) throw std::runtime_error("HDF5 group used before it was opened (its datasets)");
  H5G_info_t info{};
  check(H5Gget_info(h_->id(), &info), "H5Gget_info", path_);
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n =
        H5Lget_name_by_idx(h_->id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    check(n < 0 ? -1 : 0, "H5Lget_name_by_idx", path_);
    std::string name(static_cast<std::size_t>(n) + 1, '\0');
    check(H5Lget_name_by_idx(h_->id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                             H5P_DEFAULT) < 0
              ? -1
              : 0,
          "H5Lget_name_by_idx", path_);
    name.resize(static_cast<std::size_t>(n));
    Id obj(
        check_id(H5Oopen(h_->id(), name.c_str(), H5P_DEFAULT), "H5Oopen", join_path(path_, name)),
        H5Oclose);
    if (H5Iget_type(*obj) == H5I_DATASET) names.push_back(name);
  }
  return names;
}

void Group::attach_scales(const std::string& dataset, const std::vector<std::string>& scales) {
  if (!h_)
    throw std::runtime_error("HDF5 group used before it was opened (scales of " + dataset + ")");
  const std::string path = join_path(path_, dataset);
  Id ds = open_dataset(h_->id(), dataset, path);
  Id space(check_id(H5Dget_space(*ds), "H5Dget_space", path), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(*space);
  check(rank < 0 ? -1 : 0, "H5Sget_simple_extent_ndims", path);
  if (static_cast<std::size_t>(rank) != scales.size())
    throw std::logic_error("dataset '" + path + "' has " + std::to_string(rank) + " axes, given " +
                           std::to_string(scales.size()) + " dimension scales");
  for (unsigned axis = 0; axis < scales.size(); ++axis) {
    Id scale = open_dataset(h_->id(), scales[axis], scales[axis]);
    check(H5DSattach_scale(*ds, *scale, axis), "H5DSattach_scale", path + " axis " + scales[axis]);
    check(H5DSset_label(*ds, axis, base_name(scales[axis]).c_str()), "H5DSset_label", path);
  }
}

}  // namespace rb::h5
