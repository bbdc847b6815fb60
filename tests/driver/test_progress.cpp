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
    for (std::size_t i = 0; i < 500; ++i) p.point_started(i, "x");
  }
  const std::string out = printed(f);
  CHECK(count(out, "\n") == 2);
  CHECK(out.find("[coll] point 1/500 x (elapsed") == 0);
  CHECK(out.find("[coll] point 500/500 x") != std::string::npos);
  CHECK(out.find("ETA >= ") != std::string::npos);
  std::fclose(f);
}

TEST_CASE("progress: a slow sweep prints every point, other ranks print nothing") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  rb::Progress p(0, "ring", 3, /*min_interval_s=*/0.01, f);
  for (std::size_t i = 0; i < 3; ++i) {
    p.point_started(i, "S=" + std::to_string(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  p.note("summary");
  rb::Progress quiet(1, "ring", 3, 0.0, f);
  quiet.point_started(0, "hidden");
  quiet.note("hidden");
  const std::string out = printed(f);
  CHECK(count(out, "[ring] point ") == 3);
  CHECK(out.find("[ring] summary\n") != std::string::npos);
  CHECK(out.find("hidden") == std::string::npos);
  std::fclose(f);
}
