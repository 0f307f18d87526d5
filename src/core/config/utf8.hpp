// UTF-8 as RFC 3629 defines it, for the JSON reader and writer (json.hpp): one sequence decoded
// with the reason it is invalid (overlong forms, UTF-16 surrogates, code points above U+10FFFF,
// truncated or stray continuation bytes), and a code point encoded. Internal to src/core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ortops::utf8 {

// One UTF-8 sequence at p (n bytes left, n >= 1): nullptr with its length and code point, or
// why it is not valid UTF-8 ("invalid UTF-8 (...)", the reader's message).
const char*
decode(const unsigned char* p, size_t n, size_t& length, uint32_t& cp);

// Append the UTF-8 encoding of a code point (at most U+10FFFF, not a surrogate).
void
append(std::string& out, uint32_t cp);

} // namespace ortops::utf8
