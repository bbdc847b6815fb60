// Parallel HDF5 writer: every test case runs on every rank (the writer is collective); rank 0
// reads the closed (or flushed) file back with the serial helpers and checks every value.
#include <doctest/doctest.h>
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "metrics/h5.hpp"
#include "metrics/table.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using rb::h5::File;
using rb::h5::Group;
using rb::h5::Meta;

namespace {

using rb::test::error_of;
using rb::test::rank;
using rb::test::world;

std::string test_path(const std::string& name) {
  return rb::test::test_path("metrics", name);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Rank-dependent values, used both to write and to check.
double dval(int r, int i) {
  return r * 100.0 + i + 0.25;
}
std::int64_t ival(int r, int i) {
  return (std::int64_t{1} << 40) * (r + 1) - i;
}
std::string sval(int r) {
  return r == 0 ? std::string()
                : "rank \xcf\x81 " + std::string(static_cast<std::size_t>(r) * 3, 'x');
}

void check_meta(const std::string& file, const std::string& dataset, const Meta& m) {
  CHECK(rb::h5::read_string_attr(file, dataset, "units") == m.units);
  CHECK(rb::h5::read_string_attr(file, dataset, "description") == m.description);
}

// Writes every kind of dataset (used by the round-trip and the h5py test).
void write_everything(File& f) {
  const int r = rank();
  Group g = f.root().group("data");
  std::vector<double> drow;
  std::vector<std::int64_t> irow;
  for (int i = 0; i < 6; ++i) {
    drow.push_back(dval(r, i));
    irow.push_back(ival(r, i));
  }
  g.write_per_rank("d2x3", drow, {2, 3}, {"s", "per-rank 2x3 doubles"});
  g.write_per_rank("i6", irow, {6}, {"B", "per-rank 6 int64"});
  g.write_per_rank("dscalar", dval(r, 7), {"GB/s", "one double per rank"});
  g.write_per_rank("iscalar", ival(r, 7), {"1", "one int64 per rank"});
  g.write_per_rank("empty", std::vector<double>{}, {0}, {"s", "zero-length rows"});
  g.write_per_rank("empty3x0", std::vector<std::int64_t>{}, {3, 0}, {"1", "zero-length 3x0 rows"});
  g.write_per_rank_string("name", sval(r), {"1", "per-rank UTF-8 string"});
  g.write_per_rank_string("blank", std::string(), {"1", "all-empty strings"});
  g.write_shared("shared_d", std::vector<double>{0.5, 1.5, 2.5, 3.5, 4.5, 5.5}, {3, 2},
                 {"B/s", "shared doubles"});
  g.write_shared("shared_i", std::vector<std::int64_t>{-1, 0, 1LL << 50}, {3},
                 {"B", "shared ints"});
  g.write_shared("shared_empty", std::vector<double>{}, {0}, {"s", "shared empty"});
  g.write_shared_strings("shared_s", {"alpha", "", "\xc3\xbc longer one"}, {"1", "shared strings"});
}

void check_everything(const std::string& path) {
  const int n = world();
  std::vector<std::uint64_t> dims;
  const auto d = rb::h5::read_doubles(path, "/data/d2x3", &dims);
  CHECK(dims == std::vector<std::uint64_t>{static_cast<std::uint64_t>(n), 2, 3});
  REQUIRE(d.size() == static_cast<std::size_t>(n) * 6);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 6; ++i) CHECK(d[r * 6 + i] == dval(r, i));
  check_meta(path, "/data/d2x3", {"s", "per-rank 2x3 doubles"});

  const auto iv = rb::h5::read_ints(path, "/data/i6", &dims);
  CHECK(dims == std::vector<std::uint64_t>{static_cast<std::uint64_t>(n), 6});
  REQUIRE(iv.size() == static_cast<std::size_t>(n) * 6);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 6; ++i) CHECK(iv[r * 6 + i] == ival(r, i));
  check_meta(path, "/data/i6", {"B", "per-rank 6 int64"});

  const auto ds = rb::h5::read_doubles(path, "/data/dscalar", &dims);
  CHECK(dims == std::vector<std::uint64_t>{static_cast<std::uint64_t>(n)});
  REQUIRE(ds.size() == static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) CHECK(ds[r] == dval(r, 7));
  check_meta(path, "/data/dscalar", {"GB/s", "one double per rank"});

  const auto is = rb::h5::read_ints(path, "/data/iscalar", &dims);
  CHECK(dims == std::vector<std::uint64_t>{static_cast<std::uint64_t>(n)});
  REQUIRE(is.size() == static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) CHECK(is[r] == ival(r, 7));
  check_meta(path, "/data/iscalar", {"1", "one int64 per rank"});

  CHECK(rb::h5::read_doubles(path, "/data/empty", &dims).empty());
  CHECK(dims == std::vector<std::uint64_t>{static_cast<std::uint64_t>(n), 0});
  check_meta(path, "/data/empty", {"s", "zero-length rows"});
  CHECK(rb::h5::read_ints(path, "/data/empty3x0", &dims).empty());
  CHECK(dims == std::vector<std::uint64_t>{static_cast<std::uint64_t>(n), 3, 0});
  check_meta(path, "/data/empty3x0", {"1", "zero-length 3x0 rows"});

  const auto names = rb::h5::read_strings(path, "/data/name");
  REQUIRE(names.size() == static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) CHECK(names[r] == sval(r));
  check_meta(path, "/data/name", {"1", "per-rank UTF-8 string"});
  CHECK(rb::h5::read_strings(path, "/data/blank") == std::vector<std::string>(n, ""));

  CHECK(rb::h5::read_doubles(path, "/data/shared_d", &dims) ==
        std::vector<double>{0.5, 1.5, 2.5, 3.5, 4.5, 5.5});
  CHECK(dims == std::vector<std::uint64_t>{3, 2});
  check_meta(path, "/data/shared_d", {"B/s", "shared doubles"});
  CHECK(rb::h5::read_ints(path, "/data/shared_i", &dims) ==
        std::vector<std::int64_t>{-1, 0, 1LL << 50});
  CHECK(dims == std::vector<std::uint64_t>{3});
  check_meta(path, "/data/shared_i", {"B", "shared ints"});
  CHECK(rb::h5::read_doubles(path, "/data/shared_empty", &dims).empty());
  CHECK(dims == std::vector<std::uint64_t>{0});
  CHECK(rb::h5::read_strings(path, "/data/shared_s") ==
        std::vector<std::string>{"alpha", "", "\xc3\xbc longer one"});
  check_meta(path, "/data/shared_s", {"1", "shared strings"});
}

}  // namespace

TEST_CASE("every write_* function round-trips, with shapes, units and descriptions") {
  const std::string path = test_path("roundtrip");
  {
    File f = File::create(path, MPI_COMM_WORLD, false);
    write_everything(f);
    f.close();
    f.close();  // idempotent
  }
  if (rank() == 0) check_everything(path);
  MPI_Barrier(MPI_COMM_WORLD);

  // Collective read-only open sees the same structure.
  File r = File::open_read(path, MPI_COMM_WORLD);
  Group root = r.root();
  CHECK(root.exists("data"));
  CHECK(root.exists("data/d2x3"));
  CHECK_FALSE(root.exists("data/nothing"));
  CHECK_FALSE(root.exists("nothing/deeper"));
  r.close();
}

TEST_CASE("MPI-IO hints are accepted and large datasets start on the alignment") {
  const std::string path = test_path("aligned");
  rb::h5::IoHints hints;
  hints.mpiio = {{"romio_cb_write", "enable"}, {"striping_unit", "1048576"}, {"no_such_hint", "1"}};
  hints.alignment_bytes = 65536;
  {
    File f = File::create(path, MPI_COMM_WORLD, true, "", hints);
    Group g = f.root().group("data");
    g.write_per_rank("small", std::vector<double>(3, 1.0), {3}, {"1", "below the threshold"});
    g.write_per_rank("large", std::vector<double>(10000, 2.0), {10000}, {"1", "80 KB per rank"});
    f.close();
  }
  if (rank() == 0) {
    CHECK(rb::h5::dataset_offset(path, "/data/large") % 65536 == 0);
    CHECK(rb::h5::read_doubles(path, "/data/large").size() ==
          10000u * static_cast<std::size_t>(rb::test::world()));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Without the alignment the same layout packs the large dataset after the small one.
  const std::string packed = test_path("packed");
  {
    File f = File::create(packed, MPI_COMM_WORLD, true);
    Group g = f.root().group("data");
    g.write_per_rank("small", std::vector<double>(3, 1.0), {3}, {"1", "below the threshold"});
    g.write_per_rank("large", std::vector<double>(10000, 2.0), {10000}, {"1", "80 KB per rank"});
    f.close();
  }
  if (rank() == 0) CHECK(rb::h5::dataset_offset(packed, "/data/large") % 65536 != 0);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("attributes round-trip; set_attr overwrites; attr refuses duplicates") {
  const std::string path = test_path("attrs");
  {
    File f = File::create(path, MPI_COMM_WORLD, false);
    Group g = f.root().group("run");
    // Rank 0's values are the ones written, whatever the others pass.
    const int r = rank();
    g.attr("text",
           r == 0 ? std::string("caf\xc3\xa9 on rank 0") : "other rank " + std::to_string(r));
    g.attr("literal", "a C string");
    g.attr("empty", std::string());
    g.attr("count", static_cast<std::int64_t>(world() * 1000 + r));
    g.attr("small", 7 + r);
    g.attr("ratio", 0.125 + r);
    g.attr("ints", std::vector<std::int64_t>{1, -2, 3 + r});
    g.attr("doubles", std::vector<double>{0.5, 2.5 * (r + 1)});
    g.attr("no_ints", std::vector<std::int64_t>{});
    // Larger than HDF5's 64 KiB compact-attribute limit (a config file can be long).
    g.attr("config_text", std::string(200000, 'c') + "end");
    g.set_attr("status", "running");
    g.set_attr("status", "complete");  // overwrite
    g.set_attr("failure", "");
    g.set_attr("failure", "rank 3 ran out of memory");

    const std::string dup = error_of([&] { g.attr("text", "again"); });
    CHECK(dup.find("already exists") != std::string::npos);
    CHECK(dup.find("text") != std::string::npos);
    f.close();
  }
  if (rank() == 0) {
    CHECK(rb::h5::read_string_attr(path, "/run", "text") == "caf\xc3\xa9 on rank 0");
    CHECK(rb::h5::read_string_attr(path, "/run", "literal") == "a C string");
    CHECK(rb::h5::read_string_attr(path, "/run", "empty") == "");
    CHECK(rb::h5::read_int_attr(path, "/run", "count") ==
          std::vector<std::int64_t>{world() * 1000});
    CHECK(rb::h5::read_int_attr(path, "/run", "small") == std::vector<std::int64_t>{7});
    CHECK(rb::h5::read_double_attr(path, "/run", "ratio") == std::vector<double>{0.125});
    CHECK(rb::h5::read_int_attr(path, "/run", "ints") == std::vector<std::int64_t>{1, -2, 3});
    CHECK(rb::h5::read_double_attr(path, "/run", "doubles") == std::vector<double>{0.5, 2.5});
    CHECK(rb::h5::read_int_attr(path, "/run", "no_ints").empty());
    CHECK(rb::h5::read_string_attr(path, "/run", "config_text") ==
          std::string(200000, 'c') + "end");
    CHECK(rb::h5::read_string_attr(path, "/run", "status") == "complete");
    CHECK(rb::h5::read_string_attr(path, "/run", "failure") == "rank 3 ran out of memory");
    CHECK(error_of([&] { rb::h5::read_string_attr(path, "/run", "missing"); }).find("missing") !=
          std::string::npos);
    CHECK(error_of([&] { rb::h5::read_string_attr(path, "/run", "count"); }).find("not a string") !=
          std::string::npos);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("an existing file is refused on every rank unless --force") {
  const std::string path = test_path("nested/dirs/force");  // parent directories get created
  {
    File f = File::create(path, MPI_COMM_WORLD, false);
    f.root().attr("generation", "first");
    f.close();
  }
  std::string before;
  if (rank() == 0) before = file_bytes(path);

  const std::string expected =
      "output file '" + path +
      "' already exists; pass --force to overwrite it or choose another --output";
  const std::string msg = error_of([&] { File::create(path, MPI_COMM_WORLD, false); });
  CHECK(msg == expected);
  // Every rank got exactly the same message.
  int len = static_cast<int>(msg.size()), min_len = 0, max_len = 0;
  MPI_Allreduce(&len, &min_len, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&len, &max_len, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(min_len == max_len);
  if (rank() == 0) {
    CHECK(!before.empty());
    CHECK(file_bytes(path) == before);  // left intact, byte for byte
    CHECK(rb::h5::read_string_attr(path, "/", "generation") == "first");
  }
  MPI_Barrier(MPI_COMM_WORLD);

  {
    File f = File::create(path, MPI_COMM_WORLD, true);
    f.root().attr("other", "second");
    f.close();
  }
  if (rank() == 0) {
    CHECK(rb::h5::read_string_attr(path, "/", "other") == "second");
    // Truncated: nothing of the first file survives.
    CHECK(error_of([&] { rb::h5::read_string_attr(path, "/", "generation"); }) != "");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A fresh, empty directory for one test case (collective).
static std::string fresh_dir(const std::string& name) {
  const std::string dir = rb::test::test_path("metrics", name, "");
  if (rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

TEST_CASE("--force replaces an old file only when the new one is closed, and a link as a link") {
  const std::string dir = fresh_dir("replace");
  const std::string path = dir + "/out.h5";
  {
    File f = File::create(path, MPI_COMM_WORLD, false);
    f.root().attr("generation", "old");
    f.close();
  }
  std::string old_bytes;
  if (rank() == 0) old_bytes = file_bytes(path);
  {
    File f = File::create(path, MPI_COMM_WORLD, true);
    f.root().attr("generation", "new");
    f.flush();
    // Flushed data is not a finished run: a full disk or a signal now keeps the old file
    // (issue #31 round two, D3: it was replaced at the first flush, then lost with the run).
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0) CHECK(file_bytes(path) == old_bytes);
    MPI_Barrier(MPI_COMM_WORLD);
    f.close();
    if (rank() == 0) CHECK(rb::h5::read_string_attr(path, "/", "generation") == "new");
  }
  std::string pending;
  {  // dropped without close() (an error path): the old file stays, the new one keeps its name
    File f = File::create(path, MPI_COMM_WORLD, true);
    f.root().attr("generation", "dropped");
    f.flush();
    pending = f.pending();
    CHECK(!pending.empty());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) {
    CHECK(rb::h5::read_string_attr(path, "/", "generation") == "new");
    CHECK(fs::exists(pending));
    fs::remove(pending);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) {  // no temporary file is left beside it
    int others = 0;
    for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
      others += e.path() != fs::path(path);
    CHECK(others == 0);
    // A link to another file: refused without --force; with it the link is replaced, the
    // file it pointed to is untouched. A dangling link is refused too (never followed).
    fs::remove(path);
    { std::ofstream(dir + "/target.txt") << "keep me"; }
    fs::create_symlink("target.txt", path);
    fs::create_symlink("nowhere.h5", dir + "/dangling.h5");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (const std::string& link : {path, dir + "/dangling.h5"}) {
    const std::string msg = error_of([&] { File::create(link, MPI_COMM_WORLD, false); });
    CHECK(msg.find("is a symbolic link") != std::string::npos);
    CHECK(msg.find("replace the link itself (never its target)") != std::string::npos);
  }
  if (rank() == 0) CHECK(!fs::exists(dir + "/nowhere.h5"));
  {
    File f = File::create(path, MPI_COMM_WORLD, true);
    f.root().attr("generation", "through --force");
    f.close();
  }
  if (rank() == 0) {
    CHECK(!fs::is_symlink(fs::symlink_status(path)));
    CHECK(rb::h5::read_string_attr(path, "/", "generation") == "through --force");
    CHECK(file_bytes(dir + "/target.txt") == "keep me");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("refused outputs: a directory, the config file, a path too long for MPI-IO") {
  const std::string dir = fresh_dir("refused");
  if (rank() == 0) {
    fs::create_directories(dir + "/sub");
    std::ofstream(dir + "/config.yaml") << "sweeps: []\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(error_of([&] {
          File::create(dir + "/sub", MPI_COMM_WORLD, true);
        }).find("is a directory") != std::string::npos);
  CHECK(error_of([&] {
          File::create(dir + "/config.yaml", MPI_COMM_WORLD, true, dir + "/config.yaml");
        }).find("is the config file") != std::string::npos);
  // Open MPI aborts inside MPI-IO on such a path; the check must come first (and agree).
  const std::string long_path = dir + "/" + std::string(250, 'x') + ".h5";
  const std::string msg = error_of([&] { File::create(long_path, MPI_COMM_WORLD, false); });
  CHECK(msg.find("too long for MPI-IO") != std::string::npos);
  if (rank() == 0) CHECK(!fs::exists(long_path));
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a write past the file size limit names the OS reason, on every rank") {
  // From 3 ranks on, Open MPI's two-phase write loses the error on the writing rank and one
  // rank's flush fails inside HDF5 while the others wait in its barrier: that rank ends the run
  // (MPI_Abort, within h5_detail's 5 s), which a unit test cannot survive. To see it by hand:
  // RB_TEST_ABORT_PATH=1 mpirun -np 3 -x RB_TEST_ABORT_PATH test_metrics -tc="a write past*"
  if (world() > 2 && !std::getenv("RB_TEST_ABORT_PATH")) return;
  const std::string path = test_path("fsize");
  File f = File::create(path, MPI_COMM_WORLD, false);
  f.flush();
  // ulimit -f: the kernel refuses writes past the limit (EFBIG; SIGXFSZ ignored so the process
  // lives), as a full disk refuses them with ENOSPC. HDF5's MPI-IO driver says only "file write
  // failed"; the message must say why.
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 1 << 20;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  const std::vector<double> row(1 << 20, 1.0);  // 8 MiB per rank
  // With one or two ranks the write itself fails; with more, Open MPI's two-phase write loses
  // the error and the flush's check of the file on disk must find the missing bytes.
  const std::string msg = error_of([&] {
    f.root().write_per_rank("big", row, {row.size()}, Meta{"1", "too big", "metric"});
    f.flush();
  });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  CAPTURE(msg);
  CHECK((msg.find("HDF5 H5Dwrite failed for '/big'") != std::string::npos ||
         msg.find("the file system did not take the rest") != std::string::npos));
  CHECK(msg.find("File too large: the file size limit (ulimit -f) is 1048576 bytes") !=
        std::string::npos);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("opening a missing file throws on every rank, naming the call and the path") {
  const std::string path = test_path("missing");
  const std::string msg = error_of([&] { File::open_read(path, MPI_COMM_WORLD); });
  CHECK(msg.find("H5Fopen") != std::string::npos);
  CHECK(msg.find(path) != std::string::npos);
  if (rank() == 0) {
    const std::string serial = error_of([&] { rb::h5::read_doubles(path, "/x"); });
    CHECK(serial.find("H5Fopen") != std::string::npos);
    CHECK(serial.find(path) != std::string::npos);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("shape mistakes and missing metadata throw on every rank instead of hanging") {
  const std::string path = test_path("mistakes");
  File f = File::create(path, MPI_COMM_WORLD, false);
  Group g = f.root().group("bad");
  const int r = rank();
  const std::uint64_t cols = world() > 1 ? static_cast<std::uint64_t>(2 + r) : 2;

  if (world() > 1) {
    // Rank r passes 2+r columns: the ranks disagree.
    const std::string msg = error_of([&] {
      g.write_per_rank("ragged", std::vector<double>(cols, 1.0), {cols}, {"s", "ragged"});
    });
    CHECK(msg.find("/bad/ragged") != std::string::npos);
    CHECK(msg.find("[2]") != std::string::npos);
    CHECK(msg.find("[" + std::to_string(world() + 1) + "]") != std::string::npos);
    // Different numbers of dimensions.
    const std::string nd = error_of([&] {
      if (r == 0)
        g.write_per_rank("ndims", std::vector<double>(4, 1.0), {2, 2}, {"s", "ndims"});
      else
        g.write_per_rank("ndims", std::vector<double>(4, 1.0), {4}, {"s", "ndims"});
    });
    CHECK(nd.find("/bad/ndims") != std::string::npos);
    CHECK(nd.find("dimensions") != std::string::npos);
    // Shared data whose shape differs from rank 0's.
    const std::string sh = error_of([&] {
      g.write_shared("shared", std::vector<double>(cols, 0.0), {cols}, {"s", "shared"});
    });
    CHECK(sh.find("/bad/shared") != std::string::npos);
  }
  // One rank's row does not match its declared shape (the last rank errs; all throw).
  const bool liar = r == world() - 1;
  const std::string sz = error_of([&] {
    g.write_per_rank("size", std::vector<std::int64_t>(liar ? 5 : 6, 1), {2, 3}, {"1", "size"});
  });
  CHECK(sz.find("/bad/size") != std::string::npos);
  CHECK(sz.find("[2, 3]") != std::string::npos);

  const std::string nounits = error_of([&] {
    g.write_per_rank("nounits", 1.0, {"", "no units given"});
  });
  CHECK(nounits.find("/bad/nounits") != std::string::npos);
  CHECK(nounits.find("units") != std::string::npos);
  CHECK(error_of([&] {
          g.write_per_rank_string("nodesc", "x", {"1", ""});
        }).find("description") != std::string::npos);
  CHECK(error_of([&] { g.write_shared_strings("nodesc2", {"x"}, {"", ""}); }) != "");

  // After all those refusals the file is still consistent and writable.
  g.write_per_rank("fine", static_cast<std::int64_t>(r), {"1", "written after the errors"});
  f.close();
  if (r == 0) {
    CHECK(rb::h5::read_ints(path, "/bad/fine").size() == static_cast<std::size_t>(world()));
    CHECK(error_of([&] { rb::h5::read_doubles(path, "/bad/ragged"); }) != "");  // never created
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("flushed data is readable while the file is still open") {
  const std::string path = test_path("flush");
  File f = File::create(path, MPI_COMM_WORLD, false);
  Group run = f.root().group("run");
  run.set_attr("status", "running");
  Group s = f.root().group("sweeps").group("first");
  s.write_per_rank("value", dval(rank(), 1), {"s", "first sweep"});
  s.set_attr("status", "complete");
  f.flush();
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) {
    CHECK(rb::h5::read_string_attr(path, "/run", "status") == "running");
    CHECK(rb::h5::read_string_attr(path, "/sweeps/first", "status") == "complete");
    const auto v = rb::h5::read_doubles(path, "/sweeps/first/value");
    REQUIRE(v.size() == static_cast<std::size_t>(world()));
    for (int r = 0; r < world(); ++r) CHECK(v[r] == dval(r, 1));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // The writer carries on after the reader looked.
  f.root().group("sweeps").group("second").write_per_rank("value", 2.0, {"s", "second sweep"});
  run.set_attr("status", "complete");
  f.close();
  if (rank() == 0) {
    CHECK(rb::h5::read_string_attr(path, "/run", "status") == "complete");
    CHECK(rb::h5::read_doubles(path, "/sweeps/second/value") == std::vector<double>(world(), 2.0));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("group() opens or creates, exists() agrees everywhere") {
  const std::string path = test_path("groups");
  File f = File::create(path, MPI_COMM_WORLD, false);
  Group root = f.root();
  CHECK(root.path() == "/");
  CHECK_FALSE(root.exists("sweeps"));
  Group a = root.group("sweeps");
  CHECK(a.path() == "/sweeps");
  CHECK(root.exists("sweeps"));
  a.group("pingpong").attr("type", "host_pingpong");
  // Reopening finds the same group (its attribute is there: a duplicate attr refuses).
  Group again = root.group("sweeps").group("pingpong");
  CHECK(again.path() == "/sweeps/pingpong");
  CHECK(error_of([&] { again.attr("type", "x"); }).find("already exists") != std::string::npos);
  // Nested names create the intermediate groups.
  Group deep = root.group("x/y/z");
  CHECK(deep.path() == "/x/y/z");
  CHECK(root.exists("x/y"));
  CHECK(root.exists("x/y/z"));
  CHECK_FALSE(root.exists("x/q/z"));
  f.close();
  // A Group that outlives its file reports an error instead of crashing.
  CHECK(error_of([&] { again.attr("late", "x"); }) != "");
  if (rank() == 0)
    CHECK(rb::h5::read_string_attr(path, "/sweeps/pingpong", "type") == "host_pingpong");
  MPI_Barrier(MPI_COMM_WORLD);
}

// A schema-v2 points table for the h5py reader: 2 points; rank 0 measured nothing at point 1.
void write_points_table(File& f) {
  Group g = f.root().group("table");
  rb::h5::PointsTable t(2);
  t.key("message_size_bytes", std::vector<std::int64_t>{8, 1024}, {"B", "message size"});
  t.key("dtype", std::vector<std::string>{"float32", "bfloat16"}, {"1", "element type"});
  t.metric("time_s", {"s", "time per iteration"}, {3});
  t.int_metric("peer", {"1", "partner rank"});
  t.text_metric("status", {"1", "outcome"});
  t.metric("lane_s", {"s", "per lane"}, {2}, {"lane"});
  for (std::size_t p = 0; p < 2; ++p) {
    if (p == 1 && rank() == 0) continue;
    t.set("time_s", p, std::vector<double>{1.0 * rank(), 2.0, 3.0});
    t.set_int("peer", p, (rank() + 1) % world());
    t.set_text("status", p, "ok");
  }
  t.write(g);
}

TEST_CASE("points table: an axis of two lengths, or a metric named as a scale, throws everywhere") {
  const std::string path = test_path("scale_conflicts");
  File f = File::create(path, MPI_COMM_WORLD, true);
  rb::h5::PointsTable t(2);
  t.metric("a_s", {"s", "a"}, {3}, {"step"});
  t.metric("b_s", {"s", "b"}, {4}, {"step"});
  Group g = f.root().group("conflict");
  CHECK(error_of([&] {
          t.write(g);
        }).find("axis 'step' of 'b_s' has length 4, another metric's 3") != std::string::npos);
  rb::h5::PointsTable u(2);
  u.int_metric("rank", {"1", "a metric named as the rank scale"});
  Group h = f.root().group("named");
  CHECK(error_of([&] { u.write(h); }).find("'rank' names a dimension scale") != std::string::npos);
  rb::h5::PointsTable v(2);
  CHECK(error_of([&] {
          v.metric("c_s", {"s", "c"}, {3}, {"x", "y"});
        }).find("names 2 axes for 1") != std::string::npos);
  f.close();
}

TEST_CASE("h5py reads the file: str attributes, .asstr() string datasets, shapes, values") {
  const std::string path = test_path("h5py");
  {
    File f = File::create(path, MPI_COMM_WORLD, false);
    f.root().group("run").attr("status", "complete");
    write_everything(f);
    write_points_table(f);
    f.close();
  }
  int rc = 0;
  if (rank() == 0) {
    if (std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0) {
      rc = -1;
    } else {
      const std::string cmd = std::string("/usr/bin/python3 ") + RINGBENCH_SOURCE_DIR +
                              "/tests/metrics/check_h5py.py '" + path + "' " +
                              std::to_string(world());
      rc = std::system(cmd.c_str());
    }
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rc == -1) {
    MESSAGE("h5py is not installed for /usr/bin/python3: h5py check skipped");
  } else {
    CHECK(rc == 0);
  }
}

// ---- the points table: keys [P], per-rank metrics [world, P, ...], roles, unit names ----

TEST_CASE("points table: keys, padded per-rank metrics, missing values, roles") {
  const std::string path = test_path("points_table");
  {
    File f = File::create(path, MPI_COMM_WORLD, false);
    Group root = f.root();
    Group sweep = root.group("sweep");
    rb::h5::PointsTable t(3);
    t.key("ring_size", std::vector<std::int64_t>{1, 2, 4}, {"1", "ranks per ring"});
    t.key("layout", std::vector<std::string>{"contiguous", "zigzag", "striped"}, {"1", "layout"});
    t.metric("forward_time_s", {"s", "forward time"});
    t.metric("step_wait_s", {"s", "wait per ring step"}, {4});
    t.int_metric("ring_id", {"1", "ring of this rank"});
    t.text_metric("status", {"1", "outcome"});
    for (std::size_t p = 0; p < 3; ++p) {
      if (p == 1 && rank() == 0) continue;  // rank 0 skipped point 1: stays missing
      t.set("forward_time_s", p, 10.0 * rank() + static_cast<double>(p));
      t.set("step_wait_s", p, std::vector<double>(p + 1, 0.5));  // shorter rows are padded
      t.set_int("ring_id", p, rank());
      t.set_text("status", p, p == 2 ? "oom" : "ok");
    }
    t.write(sweep);
    f.close();
  }
  if (rank() == 0) {
    std::vector<std::uint64_t> dims;
    const auto fwd = rb::h5::read_doubles(path, "/sweep/forward_time_s", &dims);
    REQUIRE(dims == std::vector<std::uint64_t>{static_cast<std::uint64_t>(world()), 3});
    CHECK(fwd[0] == 0.0);
    CHECK(std::isnan(fwd[1]));
    CHECK(fwd[2] == 2.0);
    if (world() > 1) CHECK(fwd[3 + 1] == 11.0);
    const auto steps = rb::h5::read_doubles(path, "/sweep/step_wait_s", &dims);
    REQUIRE(dims == std::vector<std::uint64_t>{static_cast<std::uint64_t>(world()), 3, 4});
    CHECK(steps[0] == 0.5);
    CHECK(std::isnan(steps[1]));
    CHECK(rb::h5::read_ints(path, "/sweep/points/ring_size") == std::vector<std::int64_t>{1, 2, 4});
    CHECK(rb::h5::read_strings(path, "/sweep/points/layout")[1] == "zigzag");
    CHECK(rb::h5::read_string_attr(path, "/sweep/points/layout", "role") == "key");
    CHECK(rb::h5::read_string_attr(path, "/sweep/forward_time_s", "role") == "metric");
    CHECK(rb::h5::read_int_attr(path, "/sweep", "points") == std::vector<std::int64_t>{3});
    const auto status = rb::h5::read_strings(path, "/sweep/status");
    REQUIRE(status.size() == 3u * static_cast<std::size_t>(world()));
    CHECK(status[0] == "ok");
    CHECK(status[1].empty());
    CHECK(status[2] == "oom");
  }
}

TEST_CASE("points table: the unit-naming rule and declaration errors") {
  CHECK_NOTHROW(rb::h5::check_unit_name("forward_time_s", "s"));
  CHECK_NOTHROW(rb::h5::check_unit_name("busbw_Bps", "B/s"));
  CHECK_NOTHROW(rb::h5::check_unit_name("wrong_elements", "1"));
  CHECK(error_of([] { rb::h5::check_unit_name("forward_time", "s"); }).find("must end in '_s'") !=
        std::string::npos);
  CHECK(error_of([] { rb::h5::check_unit_name("latency_s", "1"); }).find("units '1'") !=
        std::string::npos);
  CHECK(error_of([] { rb::h5::check_unit_name("bw", "GB/s"); }).find("unit-naming rule") !=
        std::string::npos);
  rb::h5::PointsTable t(2);
  t.metric("x_s", {"s", "x"});
  CHECK(error_of([&] { t.metric("x_s", {"s", "x"}); }).find("declared twice") != std::string::npos);
  CHECK(error_of([&] { t.set("y_s", 0, 1.0); }).find("not declared") != std::string::npos);
  CHECK(error_of([&] { t.set("x_s", 2, 1.0); }).find("point 2 of 2") != std::string::npos);
  CHECK(error_of([&] {
          t.key("k", std::vector<std::int64_t>{1}, {"1", "k"});
        }).find("1 values for 2 points") != std::string::npos);
}

TEST_CASE("points table: each metric says how it is judged; judging a missing name throws") {
  const std::string path = test_path("judging");
  {
    File f = File::create(path, MPI_COMM_WORLD, false);
    Group sweep = f.root().group("sweep");
    rb::h5::PointsTable t(2);
    t.key("message_size_bytes", std::vector<std::int64_t>{8, 1024}, {"B", "message size"});
    t.metric("time_s", {"s", "time of each iteration"}, {3}, {"iteration"});
    t.metric("busbw_Bps", {"B/s", "bus bandwidth"});
    t.int_metric("peak_memory_bytes", {"B", "memory held"});
    t.int_metric("count", {"1", "elements"});
    rb::h5::Judging j;
    j.headline = {"busbw_Bps"};
    j.noise = "p2p_bandwidth";
    j.noise_of = {{"time_s", "latency"}};
    j.lower = {"peak_memory_bytes"};
    j.each_rank = true;
    j.iteration_times = "time_s";
    j.message_size_key = "message_size_bytes";
    t.judging(j);
    t.write(sweep);
    f.close();
  }
  if (rank() == 0) {
    auto attr = [&](const std::string& ds, const char* a) {
      return rb::h5::read_string_attr(path, "/sweep/" + ds, a);
    };
    CHECK(attr("busbw_Bps", "direction") == "higher");
    CHECK(attr("busbw_Bps", "judged") == "headline");
    CHECK(attr("busbw_Bps", "noise") == "p2p_bandwidth");
    CHECK(attr("busbw_Bps", "ranks") == "each");
    CHECK(attr("busbw_Bps", "inner_axis") == "none");
    CHECK(attr("time_s", "direction") == "lower");
    CHECK(attr("time_s", "judged") == "no");
    CHECK(attr("time_s", "noise") == "latency");
    CHECK(attr("time_s", "inner_axis") == "iteration");
    CHECK(attr("peak_memory_bytes", "direction") == "lower");
    CHECK(attr("count", "direction") == "none");
    CHECK(attr("points/message_size_bytes", "axis") == "message_size");
    CHECK(rb::h5::read_string_attr(path, "/sweep", "iteration_times") == "time_s");
  }
  // A headline that is not a performance number, or a name the table lacks: a programming
  // error, found at write on every rank (before anything is written).
  CHECK(rb::h5::check_judging(Meta{"1", "count"}).empty());
  Meta counted{"1", "count"};
  counted.judged = "headline";
  CHECK(rb::h5::check_judging(counted).find("needs a direction") != std::string::npos);
  counted.noise = "weather";
  CHECK(rb::h5::check_judging(counted).find("noise class 'weather'") != std::string::npos);
  File f = File::create(test_path("judging_bad"), MPI_COMM_WORLD, true);
  Group sweep = f.root().group("sweep");
  rb::h5::PointsTable t(1);
  t.metric("x_s", {"s", "x"});
  rb::h5::Judging j;
  j.headline = {"y_s"};
  t.judging(j);
  CHECK(error_of([&] { t.write(sweep); }).find("judging names metric 'y_s'") != std::string::npos);
}
