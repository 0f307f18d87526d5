// What the node config's rules say about a value that came (nodeconfig.cpp, the rules;
// nodeconfig_decode.cpp, the JSON reader): untrusted text quoted and escaped, numbers as
// Python prints them, and the messages a rule and a wrongly-typed JSON value share, so that
// the decoder and the typed path (placement/node_check.hpp) say the same thing of the same
// value. Private to src/core/config.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/cells.hpp"

namespace ortops::configtext {

// Untrusted text for a message: between single quotes, printable ASCII as is, the quote and
// the backslash escaped, every other byte sequence as \xNN / \uNNNN / \UNNNNNNNN (valid UTF-8
// decoded; a stray byte as \xNN), cut after `limit` characters with "..." and the size.
std::string
quoted(std::string_view s, size_t limit = 64);

// A value as a message shows it after "got ": a string quoted and cut, an integer and a
// number as Python prints them (nan, inf and -inf included), a list by its length.
std::string
describeText(std::string_view s);
std::string
describeInteger(int64_t i);
std::string
describeNumber(double d);
std::string
describeList(size_t n);

// 'a', 'b' or 'c' (last: " or "; the key lists use " and ").
std::string
choices(const std::vector<std::string_view>& names, const char* last = " or ");

// The names a config's "absent" (outputs = false: the cell's optional inputs) or "outputs"
// list may hold, as a message lists them; a name's index in the cell (-1: not one of them);
// the message for item i of the list that is not one of them.
std::string
nameChoices(const Cell& cell, bool outputs);
int64_t
nameIndex(const Cell& cell, std::string_view name, bool outputs);
std::string
nameItemMessage(const Cell& cell, const char* key, size_t i, bool outputs, const std::string& got);

// "<key> must be <what it may be>" for the keys whose rule and JSON type share one message: op,
// dtype, mode, device, attrs.direction, attrs.hidden_size, attrs.layout, attrs.input_forget,
// attrs.linear_before_reset.
std::string
mustBe(std::string_view key);

} // namespace ortops::configtext
