// The terminal tables (h5::TextTable) and the headline statistics of a points table.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <mpi.h>

#include "metrics/table.hpp"

// A span wider than its columns widens the last of them.
TEST_CASE("text table: columns aligned, text left, numbers right, spans centred") {
  rb::h5::TextTable t({{"name", "", true}, {"time", "(us)"}, {"busbw", "(GB/s)"}});
  t.span(1, 2, "out-of-place");
  t.row({"all_reduce", "1.5", "12.25"});
  t.row({"x", "100"});
  const std::string s = t.render("== title ==", {"note"});
  CHECK(s ==
        "== title ==\n"
        "               -- out-of-place --\n"
        "   name        time         busbw\n"
        "               (us)        (GB/s)\n"
        "   all_reduce   1.5         12.25\n"
        "   x            100\n"
        "  note\n");
}

TEST_CASE("text table: long notes wrap at 100 columns, words whole") {
  rb::h5::TextTable t({{"x"}});
  std::string note;
  for (int i = 0; i < 40; ++i) note += "word" + std::to_string(i) + " ";
  note.pop_back();
  const std::string s = t.render("t", {note});
  std::size_t lines = 0, start = 0;
  for (std::size_t nl = s.find('\n'); nl != std::string::npos; nl = s.find('\n', start = nl + 1)) {
    CHECK(nl - start <= 100);
    ++lines;
  }
  CHECK(lines == 2 + 3);  // title, header, and the note (269 characters) in 3 lines
  CHECK(s.find(" word39\n") != std::string::npos);
}

TEST_CASE("numbers: missing reads '-', three significant digits at least") {
  CHECK(rb::h5::fixed(NAN, 2) == "-");
  CHECK(rb::h5::fixed(1.005, 1) == "1.0");
  CHECK(rb::h5::sig3(0.001234) == "0.00123");
  CHECK(rb::h5::sig3(7.754e-7) == "7.75e-07");
  CHECK(rb::h5::sig3(12.345) == "12.3");
  CHECK(rb::h5::sig3(4567.8) == "4568");
  CHECK(rb::h5::sig3(0) == "0");
}

TEST_CASE("records: inner then rank statistics, -1 and NaN missing, on rank 0 only") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rb::h5::PointsTable t(2);
  t.key("label", std::vector<std::string>{"a", "b"}, {"1", "label"});
  t.metric("time_s", {"s", "per iteration"}, {3});
  t.int_metric("wrong", {"1", "count"});
  // Rank r's iterations at point p: r + p + {1, 2, 10}: median r + p + 2.
  for (std::size_t p = 0; p < 2; ++p) {
    const double base = rank + static_cast<double>(p);
    t.set("time_s", p, std::vector<double>{base + 1, base + 10, base + 2});
  }
  t.set_int("wrong", 0, 1);  // point 1 stays -1: not checked
  using rb::h5::OverInner, rb::h5::OverRanks;
  const auto r = t.records({{"time_s", OverInner::Median, OverRanks::Max},
                            {"time_s", OverInner::Sum, OverRanks::Min},
                            {"wrong", OverInner::None, OverRanks::Sum}},
                           MPI_COMM_WORLD);
  if (rank != 0) {
    CHECK(r.empty());
    return;
  }
  REQUIRE(r.size() == 2);
  CHECK(r[1].text("label") == "b");
  CHECK(r[1].metrics[0].number == doctest::Approx(size - 1 + 1 + 2));
  CHECK(r[1].metrics[1].number == doctest::Approx(3 * 1 + 13));
  CHECK(r[0].metrics[2].number == doctest::Approx(size));
  CHECK(std::isnan(r[1].metrics[2].number));
  CHECK(r[0].metrics[0].statistic == "median over iterations, max over ranks");
}
