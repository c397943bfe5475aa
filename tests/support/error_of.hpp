#pragma once
// The error of a result that must have failed (the test stops when it did not).

#include <doctest/doctest.h>

#include "sailor/config/error.hpp"

namespace sailor::testing {

template <class T>
sailor::error error_of(const result<T>& r) {
  REQUIRE_FALSE(r.ok());
  return r.error();
}

}  // namespace sailor::testing
