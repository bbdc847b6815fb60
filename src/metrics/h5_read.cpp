// Serial read-back of a written file (tests, the driver's checks): numbers, strings and
// attributes, whichever of fixed- or variable-length strings they were written as.
#include "metrics/h5.hpp"

#include <cstring>

#include "metrics/h5_detail.hpp"

namespace rb::h5 {
using namespace detail;

namespace {

std::shared_ptr<Handle> open_serial(const std::string& file) {
  silence_hdf5();
  Id fapl(check_id(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate", file), H5Pclose);
  // The writer may still hold the file open (flush-then-read); do not fight over locks.
  check(H5Pset_file_locking(*fapl, false, true), "H5Pset_file_locking", file);
  return shared(check_id(H5Fopen(file.c_str(), H5F_ACC_RDONLY, *fapl), "H5Fopen", file), H5Fclose);
}

template <class T>
std::vector<T> read_numeric(const std::string& file, const std::string& dataset,
                            std::vector<std::uint64_t>* dims) {
  auto f = open_serial(file);
  Id d(check_id(H5Dopen2(f->id(), dataset.c_str(), H5P_DEFAULT), "H5Dopen2", file + ":" + dataset),
       H5Dclose);
  Id space(check_id(H5Dget_space(*d), "H5Dget_space", dataset), H5Sclose);
  const int nd = H5Sget_simple_extent_ndims(*space);
  check(nd, "H5Sget_simple_extent_ndims", dataset);
  std::vector<hsize_t> shape(static_cast<std::size_t>(nd));
  if (nd > 0)
    check(H5Sget_simple_extent_dims(*space, shape.data(), nullptr), "H5Sget_simple_extent_dims",
          dataset);
  if (dims) dims->assign(shape.begin(), shape.end());
  std::uint64_t n = 1;
  for (hsize_t s : shape) n *= s;
  std::vector<T> out(n);
  if (n > 0)
    check(H5Dread(*d, h5_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "H5Dread",
          file + ":" + dataset);
  return out;
}

// Reads a string attribute or dataset whose type is `type` and whose space has `n` elements,
// whichever of variable- or fixed-length it was written as.
template <class ReadFn>
std::vector<std::string> read_string_values(hid_t stored_type, std::size_t n,
                                            const std::string& what, ReadFn read) {
  std::vector<std::string> out(n);
  if (n == 0) return out;
  const htri_t vl = H5Tis_variable_str(stored_type);
  check(vl, "H5Tis_variable_str", what);
  if (vl > 0) {
    Id t = vl_utf8_type(what);
    std::vector<char*> ptrs(n, nullptr);
    check(read(*t, ptrs.data()), "read (variable-length string)", what);
    for (std::size_t i = 0; i < n; ++i) out[i] = ptrs[i] ? ptrs[i] : "";
    // Free the library-allocated strings through HDF5's own allocator.
    for (char* p : ptrs) H5free_memory(p);
  } else {
    const std::size_t width = H5Tget_size(stored_type);
    Id t = fixed_utf8_type(width, what);
    std::vector<char> buf(n * width);
    check(read(*t, buf.data()), "read (fixed-length string)", what);
    for (std::size_t i = 0; i < n; ++i) {
      const char* cell = buf.data() + i * width;
      out[i].assign(cell, strnlen(cell, width));
    }
  }
  return out;
}

}  // namespace

std::vector<double> read_doubles(const std::string& file, const std::string& dataset,
                                 std::vector<std::uint64_t>* dims) {
  return read_numeric<double>(file, dataset, dims);
}

std::vector<std::int64_t> read_ints(const std::string& file, const std::string& dataset,
                                    std::vector<std::uint64_t>* dims) {
  return read_numeric<std::int64_t>(file, dataset, dims);
}

std::vector<std::string> read_strings(const std::string& file, const std::string& dataset) {
  auto f = open_serial(file);
  const std::string what = file + ":" + dataset;
  Id d(check_id(H5Dopen2(f->id(), dataset.c_str(), H5P_DEFAULT), "H5Dopen2", what), H5Dclose);
  Id type(check_id(H5Dget_type(*d), "H5Dget_type", what), H5Tclose);
  if (H5Tget_class(*type) != H5T_STRING)
    throw std::runtime_error("dataset '" + what + "' does not hold strings");
  Id space(check_id(H5Dget_space(*d), "H5Dget_space", what), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(*space);
  check(static_cast<herr_t>(n < 0 ? -1 : 0), "H5Sget_simple_extent_npoints", what);
  return read_string_values(*type, static_cast<std::size_t>(n), what, [&](hid_t mem, void* buf) {
    return H5Dread(*d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  });
}

std::uint64_t dataset_offset(const std::string& file, const std::string& dataset) {
  auto f = open_serial(file);
  const std::string what = file + ":" + dataset;
  Id d(check_id(H5Dopen2(f->id(), dataset.c_str(), H5P_DEFAULT), "H5Dopen2", what), H5Dclose);
  const haddr_t at = H5Dget_offset(*d);
  if (at == HADDR_UNDEF)
    throw std::runtime_error("dataset '" + what + "' has no single offset (chunked or empty)");
  return static_cast<std::uint64_t>(at);
}

namespace {

// An attribute opened for a serial read, with its type and the text that names it in errors.
struct OpenAttr {
  std::shared_ptr<Handle> file;
  std::string what;
  Id attr, type;
  OpenAttr(const std::string& path, const std::string& object, const std::string& name)
      : file(open_serial(path)),
        what(path + ":" + object + "@" + name),
        attr(check_id(H5Aopen_by_name(file->id(), object.c_str(), name.c_str(), H5P_DEFAULT,
                                      H5P_DEFAULT),
                      "H5Aopen_by_name", what),
             H5Aclose),
        type(check_id(H5Aget_type(*attr), "H5Aget_type", what), H5Tclose) {}
};

}  // namespace

std::string read_string_attr(const std::string& file, const std::string& object,
                             const std::string& attr) {
  OpenAttr o(file, object, attr);
  const std::string& what = o.what;
  Id& a = o.attr;
  if (H5Tget_class(*o.type) != H5T_STRING)
    throw std::runtime_error("attribute '" + what + "' is not a string");
  Id space(check_id(H5Aget_space(*a), "H5Aget_space", what), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(*space);
  if (n != 1) throw std::runtime_error("attribute '" + what + "' is not a scalar string");
  return read_string_values(*o.type, 1, what,
                            [&](hid_t mem, void* buf) { return H5Aread(*a, mem, buf); })[0];
}

namespace {

template <class T>
std::vector<T> read_numeric_attr(const std::string& file, const std::string& object,
                                 const std::string& attr) {
  OpenAttr o(file, object, attr);
  const std::string& what = o.what;
  Id& a = o.attr;
  const H5T_class_t cls = H5Tget_class(*o.type);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    throw std::runtime_error("attribute '" + what + "' is not numeric");
  Id space(check_id(H5Aget_space(*a), "H5Aget_space", what), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(*space);
  check(static_cast<herr_t>(n < 0 ? -1 : 0), "H5Sget_simple_extent_npoints", what);
  std::vector<T> out(static_cast<std::size_t>(n));
  if (n > 0) check(H5Aread(*a, h5_type<T>(), out.data()), "H5Aread", what);
  return out;
}

}  // namespace

std::vector<std::int64_t> read_int_attr(const std::string& file, const std::string& object,
                                        const std::string& attr) {
  return read_numeric_attr<std::int64_t>(file, object, attr);
}

std::vector<double> read_double_attr(const std::string& file, const std::string& object,
                                     const std::string& attr) {
  return read_numeric_attr<double>(file, object, attr);
}

std::string library_version() {
  unsigned major = 0, minor = 0, release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace rb::h5
