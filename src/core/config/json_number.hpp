// The JSON reader's numbers (json.hpp; internal to src/core): RFC 8259's syntax, integers
// exact in int64, other numbers the nearest double, read with std::from_chars, which, unlike
// strtod, does not depend on the process's locale (a host that sets LC_NUMERIC to a comma
// locale would otherwise read "0.5" as 0).
#pragma once

#include <cstddef>

#include "config/json.hpp"

namespace ortops::json::detail {

// The number at p[i] (p[i] is '-' or a digit, n bytes in all), i moved past it: an Integer when
// written without fraction or exponent (refused outside int64), else a Number (refused when it
// overflows a double, or underflows to zero although not written as zero). Throws Error.
Value
readNumber(const unsigned char* p, size_t n, size_t& i);

} // namespace ortops::json::detail
