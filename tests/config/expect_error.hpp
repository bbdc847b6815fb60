#pragma once
// The ConfigError a config test expects (its file, line, key and message are then checked).
// Include after doctest.
#include <exception>

#include "config/node.hpp"

namespace rb::test {

// The ConfigError of `f`; fails the test if none (or another exception) is thrown.
template <class F>
cfg::ConfigError expect_error(F&& f) {
  try {
    f();
  } catch (const cfg::ConfigError& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL("expected a ConfigError, got another exception: " << e.what());
  }
  FAIL("expected a ConfigError, but nothing was thrown");
  throw;  // unreachable: FAIL throws
}

}  // namespace rb::test
