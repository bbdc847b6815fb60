// Issue #31: the environment checked like config values before Kokkos starts, and the files
// written beside the output (--json, the heartbeat) never written through a planted link nor
// put over a FIFO, device or socket. End to end: tests/hostile (environment, side_files).
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "app/end_record.hpp"
#include "app/environment.hpp"
#include "app/file_write.hpp"
#include "expect_error.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using rb::test::expect_error;

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("rb-side-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Sets `name` to `value` for one scope.
struct ScopedEnv {
  ScopedEnv(const char* n, const char* value) : name(n) { ::setenv(n, value, 1); }
  ~ScopedEnv() { ::unsetenv(name); }
  const char* name;
};

}  // namespace

TEST_CASE("environment: each variable ringbench or Kokkos reads is checked, named with its form") {
  struct Case {
    const char* name;
    const char* value;
    const char* expected;
  };
  const Case cases[] = {
      {"RINGBENCH_RANKS_PER_NODE", "abc",
       "an integer between 1 and 1048576 (ranks per simulated node)"},
      {"RINGBENCH_TEST_RANKS_PER_NODE", "0", "an integer between 1 and 1048576"},
      {"RINGBENCH_PLACEMENT", "Cyclic", "one of block|cyclic (did you mean 'cyclic'?)"},
      {"RINGBENCH_NCCL_STREAM_PRIORITY", "highest", "one of high|default"},
      {"RINGBENCH_TEST_NCCL_ERROR", "-1", "an integer between 0 and"},
      {"RINGBENCH_TEST_AUTO_POINT_FLOOR_S", "3s", "a number >= 0 (seconds)"},
      {"RINGBENCH_TEST_HANG_POINT", "ring:x", "SWEEP:INDEX"},
      {"KOKKOS_NUM_THREADS", "abc", "an integer between 1 and 2147483647 (host threads)"},
      {"KOKKOS_NUM_THREADS", "", "an integer between 1 and 2147483647"},
      {"KOKKOS_NUMA", "99999999999", "an integer between 1 and 2147483647 (NUMA regions)"},
      {"KOKKOS_DEVICE_ID", " 1", "an integer between 0 and 2147483647 (the GPU's index)"},
      {"KOKKOS_SKIP_DEVICE", "x", "an integer between 0 and 2147483647"},
      {"KOKKOS_TUNE_INTERNALS", "maybe", "true, on, yes, 1-9, or false, off, no, 0"}};
  CHECK_NOTHROW(rb::check_environment());
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CAPTURE(c.value);
    const ScopedEnv env(c.name, c.value);
    const rb::cfg::ConfigError e = expect_error([] { rb::check_environment(); });
    const std::string what = e.what();
    CHECK(what.rfind(std::string("environment variable ") + c.name + ": expected " + c.expected,
                     0) == 0);
    CHECK(what.find(std::string("got '") + c.value + "'; fix it or unset it") != std::string::npos);
  }
  {  // good values pass; "" means unset for ringbench's own variables
    const ScopedEnv a("RINGBENCH_RANKS_PER_NODE", "4"), b("RINGBENCH_PLACEMENT", ""),
        c("KOKKOS_NUM_THREADS", "2"), d("KOKKOS_DISABLE_WARNINGS", "ON"),
        e("RINGBENCH_TEST_HANG_POINT", "a:b:3"), f("RINGBENCH_TEST_AUTO_POINT_FLOOR_S", "0.5");
    CHECK_NOTHROW(rb::check_environment());
  }
  {  // Kokkos takes one of the two, and skipping the only random device leaves none
    const ScopedEnv a("KOKKOS_NUM_DEVICES", "2"), b("KOKKOS_RAND_DEVICES", "2");
    CHECK(expect_error([] { rb::check_environment(); })
              .message()
              .find("Kokkos takes one of the two") != std::string::npos);
  }
  const ScopedEnv a("KOKKOS_RAND_DEVICES", "1"), b("KOKKOS_SKIP_DEVICE", "0");
  CHECK(expect_error([] { rb::check_environment(); }).message().find("leaves none") !=
        std::string::npos);
}

TEST_CASE("write_file_replacing: never through a link, only over a regular file") {
  const fs::path dir = scratch("write");
  const fs::path target = dir / "target.txt", path = dir / "r.json";
  std::ofstream(target) << "keep me";
  fs::create_symlink("target.txt", dir / "r.json.tmp");  // the old fixed temporary name
  rb::write_file_replacing(path.string(), "one", false, "--json file");
  rb::write_file_replacing(path.string(), "two", false, "--json file");  // a regular file: replaced
  CHECK(read(path) == "two");
  CHECK(read(target) == "keep me");
  CHECK(fs::is_symlink(dir / "r.json.tmp"));
  CHECK((fs::status(path).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
         fs::perms::others_read));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 3);  // target, the planted link, r.json: no temporary file left

  const fs::path link = dir / "link.json";
  fs::create_symlink("target.txt", link);
  const std::string refused = rb::test::error_of(
      [&] { rb::write_file_replacing(link.string(), "x", false, "--json file"); });
  CHECK(refused.find("--json file '" + link.string() + "' is a symbolic link") == 0);
  CHECK(fs::is_symlink(link));
  rb::write_file_replacing(link.string(), "x", true, "--json file");  // --force: the link itself
  CHECK_FALSE(fs::is_symlink(link));
  CHECK(read(link) == "x");
  CHECK(read(target) == "keep me");

  const fs::path fifo = dir / "fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const fs::path sock = dir / "s.json";
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  sock.string().copy(addr.sun_path, sizeof addr.sun_path - 1);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  ::close(s);
  for (const auto& [p, kind] : {std::pair{fifo, "a FIFO (named pipe)"}, std::pair{sock, "a socket"},
                                std::pair{dir, "a directory"}}) {
    CAPTURE(kind);
    const std::string why =
        rb::test::error_of([&] { rb::write_file_replacing(p.string(), "x", true, "--json file"); });
    CHECK(why.find("'" + p.string() + "' is " + kind + "; ringbench replaces only") !=
          std::string::npos);
    CHECK(rb::refusal_to_replace(p.string(), true, "--json file") == why);
  }
  CHECK(fs::is_fifo(fifo));
  CHECK(fs::is_socket(sock));
  CHECK(rb::refusal_to_replace((dir / "absent.json").string(), false, "x").empty());
  fs::remove_all(dir.parent_path());
}

TEST_CASE("end record: made once, never through a link; a run's start removes only a regular one") {
  const fs::path dir = scratch("end");
  const fs::path out = dir / "run.h5";
  const std::string path = rb::end_record_path(out.string());
  CHECK(path == out.string() + ".end");
  const std::string text = rb::end_record_text("interrupted", "SIGTERM during sweep s\npoint 0", 3);
  CHECK(text.rfind("status: interrupted\nfailure: SIGTERM during sweep s point 0\nend_time: ", 0) ==
        0);
  CHECK(text.find("\nrank: 3\n") != std::string::npos);
  CHECK(rb::write_end_record(path, text));
  CHECK(read(path) == text);
  CHECK_FALSE(rb::write_end_record(path, "status: timeout\n"));  // the first record stands
  CHECK(read(path) == text);
  CHECK(rb::remove_end_record(path).empty());  // an earlier run's record
  CHECK_FALSE(fs::exists(path));
  CHECK(rb::remove_end_record(path).empty());  // nothing there

  const fs::path target = dir / "target";
  std::ofstream(target) << "keep me";
  fs::create_symlink(target, path);
  CHECK_FALSE(rb::write_end_record(path, text));
  CHECK(read(target) == "keep me");
  const std::string why = rb::remove_end_record(path);
  CHECK(why.find("end record '" + path + "' is a symbolic link; ringbench replaces only") == 0);
  CHECK(fs::is_symlink(path));
  fs::remove_all(dir.parent_path());
}

TEST_CASE("output directories: made 0755 under umask 000, removed again when the run wrote none") {
  const fs::path dir = scratch("dirs");
  const fs::path out = dir / "new" / "deeper" / "run.h5";
  const mode_t old_umask = ::umask(0);
  {
    const rb::OutputLock lock(out.string());
    for (const fs::path& d : {dir / "new", dir / "new" / "deeper"}) {
      struct stat st {};
      REQUIRE(::stat(d.c_str(), &st) == 0);
      CAPTURE(d);
      CHECK((st.st_mode & 07777) == 0755);  // not 0777, never world-writable
    }
  }
  CHECK_FALSE(fs::exists(dir / "new"));  // refused before writing: nothing left behind
  {
    const rb::OutputLock lock(out.string());
    std::ofstream(out) << "the output";
  }
  CHECK(read(out) == "the output");  // a directory that holds the output stays
  CHECK_FALSE(fs::exists(out.string() + ".lock"));
  ::umask(old_umask);
  fs::remove_all(dir.parent_path());
}
