// Progress lines: rank 0 only, the first and last point always, otherwise throttled.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <thread>

#include "app/progress.hpp"

namespace {

std::string printed(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) s += buf;
  return s;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("progress: many fast points print the first and the last only") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  {
    rb::Progress p(0, "coll", 500, /*min_interval_s=*/3600.0, f);
    for (std::size_t i = 0; i < 500; ++i) CHECK(p.point_started(i, "x"));
  }
  const std::string out = printed(f);
  CHECK(count(out, "\n") == 2);
  // "HH:MM:SS [coll] point ...": the UTC time first.
  REQUIRE(out.size() > 9);
  CHECK(out[2] == ':');
  CHECK(out[5] == ':');
  CHECK(out.find(" [coll] point 1/500 x (elapsed") == 8);
  CHECK(out.find("[coll] point 500/500 x") != std::string::npos);
  CHECK(out.find("ETA >= ") != std::string::npos);
  std::fclose(f);
}

TEST_CASE("progress: a slow sweep prints every point, other ranks print nothing") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  rb::Progress p(0, "ring", 3, /*min_interval_s=*/0.01, f);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(p.point_started(i, "S=" + std::to_string(i)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  p.note("summary");
  rb::Progress quiet(1, "ring", 3, 0.0, f);
  CHECK(quiet.point_started(0, "hidden"));
  quiet.note("hidden");
  const std::string out = printed(f);
  CHECK(count(out, "[ring] point ") == 3);
  CHECK(out.find("[ring] summary\n") != std::string::npos);
  CHECK(out.find("hidden") == std::string::npos);
  std::fclose(f);
}

TEST_CASE("progress: in a run, lines say the sweep number and the run's ETA; --quiet prints none") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  std::vector<rb::h5::PointRecord> got;
  // Sweep 1 estimated 1 s, sweep 2 3 s: half of sweep 2 done leaves 1.5 of 4 estimated seconds.
  // Progress lines and results in one file here; a run sends them to stderr and stdout.
  const rb::Screen screen{false, 100, f, f};
  rb::RunProgress run({1.0, 3.0}, screen,
                      [&](std::size_t, std::vector<rb::h5::PointRecord> r) { got = r; });
  CHECK(run.eta_s(1, 0.5) == doctest::Approx(run.elapsed_s() * 1.5 / 2.5).epsilon(0.5));
  CHECK(run.eta_s(0, 0.0) < 0);  // nothing done yet: unknown
  rb::Progress p(0, "coll", 2, 0.0, f);
  p.in_run(&run, 1);
  CHECK(p.point_started(0, "x"));
  p.results("TABLE\n", std::vector<rb::h5::PointRecord>(3));
  rb::RunProgress quiet_run({1.0}, rb::Screen{true, 100, f, f});
  rb::Progress q(0, "hidden", 2, 0.0, f);
  q.in_run(&quiet_run, 0);
  CHECK(q.point_started(0, "hidden"));
  q.note("hidden");
  q.results("hidden", {});
  const std::string out = printed(f);
  CHECK(out.find(" sweep 2/2 [coll] point 1/2 x (elapsed") != std::string::npos);
  CHECK(out.find("run ETA ~") != std::string::npos);
  CHECK(out.find("\nTABLE\n") != std::string::npos);
  CHECK(got.size() == 3);
  CHECK(out.find("hidden") == std::string::npos);
  std::fclose(f);
}

TEST_CASE("progress: lines on the progress stream, tables on the results stream, at its width") {
  std::FILE* progress = std::tmpfile();
  std::FILE* results = std::tmpfile();
  REQUIRE(progress);
  REQUIRE(results);
  rb::RunProgress run({1.0}, rb::Screen{false, 0, progress, results});
  rb::Progress p(0, "coll", 1, 0.0, progress);
  CHECK(p.table_width() == rb::h5::kTerminalWidth);  // outside a run: the terminal's
  p.in_run(&run, 0);
  CHECK(p.table_width() == 0);  // --wide
  CHECK(p.point_started(0, "x"));
  p.note("a note");
  p.results("TABLE\n", {});
  const std::string lines = printed(progress), tables = printed(results);
  CHECK(lines.find("[coll] point 1/1 x") != std::string::npos);
  CHECK(lines.find("[coll] a note") != std::string::npos);
  CHECK(lines.find("TABLE") == std::string::npos);
  CHECK(tables == "\nTABLE\n");
  std::fclose(progress);
  std::fclose(results);
}

TEST_CASE("durations read as people say them") {
  CHECK(rb::duration_text(0.25) == "0.25 s");
  CHECK(rb::duration_text(2.25) == "2.2 s");
  CHECK(rb::duration_text(42) == "42 s");
  CHECK(rb::duration_text(125) == "2 min 5 s");
  CHECK(rb::duration_text(7260) == "2 h 01 min");
  CHECK(rb::duration_text(-1) == "--");
}
