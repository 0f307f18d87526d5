// A small, strict JSON reader and a canonical writer, for untrusted input (a node's config
// attribute, nodeconfig.hpp). Standard library only, C++17, no recursion deeper than the
// nesting limit, no undefined behaviour on any input (tests/fuzz/ runs it under libFuzzer with
// ASan and UBSan).
//
// The reader takes any bytes and accepts exactly RFC 8259 JSON text, and refuses, naming what
// and the byte offset where:
//   - input longer than the byte limit (default 64 KiB) or nested deeper than the depth limit
//     (default 16 arrays/objects);
//   - invalid UTF-8 anywhere (overlong forms, UTF-16 surrogates U+D800..U+DFFF, code points
//     above U+10FFFF, truncated or stray continuation bytes), a byte order mark;
//   - raw control characters (U+0000..U+001F) in strings, unknown escapes, \u escapes that are
//     lone or mismatched surrogates;
//   - duplicate keys in one object;
//   - NaN, Infinity, leading zeros, a leading '+', '.5', '5.', numbers whose value overflows
//     a double or underflows to zero although not written as zero, integers (no fraction, no
//     exponent) outside int64;
//   - anything but whitespace after the value.
// An integer keeps its exact int64 value (Type::Integer); every other number is a double
// (Type::Number). Strings are returned as UTF-8 (escapes decoded; they may hold U+0000).
//
// The writer produces what Python's
//   json.dumps(v, sort_keys=True, separators=(",", ":"), allow_nan=False)
// writes for the same value (ensure_ascii: every non-ASCII character as \uXXXX, surrogate
// pairs above U+FFFF; floats as Python's repr of the double: the shortest digits that read
// back as the same double, "0.1", "1e-05", "1e+16", "100.0").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ortops::json {

inline constexpr size_t DEFAULT_MAX_BYTES = 64 * 1024;
inline constexpr int DEFAULT_MAX_DEPTH = 16;

enum class Type
{
    Null,
    Bool,
    Integer,    // written without fraction or exponent; integer holds it exactly
    Number,     // any other number; number holds it
    String,
    Array,
    Object,
};

// "null", "boolean", "integer", "number", "string", "array", "object".
const char*
typeName(Type type);

struct Value
{
    Type type = Type::Null;
    bool boolean = false;
    int64_t integer = 0;
    double number = 0.0;    // also set (rounded) for an Integer
    std::string string;
    std::vector<Value> items;                              // Array
    std::vector<std::pair<std::string, Value>> members;    // Object, in input order, keys distinct
    size_t offset = 0;                                     // byte offset of the value in the input

    static Value null() { return Value{}; }
    static Value fromBool(bool b);
    static Value fromInteger(int64_t i);
    static Value fromNumber(double d);
    static Value fromString(std::string s);
    static Value array(std::vector<Value> items = {});
    static Value object(std::vector<std::pair<std::string, Value>> members = {});

    bool isNumeric() const { return type == Type::Integer || type == Type::Number; }
    // The member named key of an Object, or nullptr.
    const Value* find(std::string_view key) const;
};

struct ParseOptions
{
    size_t maxBytes = DEFAULT_MAX_BYTES;
    int maxDepth = DEFAULT_MAX_DEPTH;
    // When not empty: the string value of this key of the top-level object is kept in
    // Error::captured once it has been read, so that an error further on can name it.
    std::string_view captureKey;
};

// A parse error. what(): "<message> at byte <offset>".
struct Error : std::invalid_argument
{
    Error(const std::string& message, size_t offset);
    std::string message;                   // without the offset
    size_t offset;
    std::optional<std::string> captured;   // ParseOptions::captureKey's value, if read
};

// Parse one JSON text (any bytes). Throws Error.
Value
parse(std::string_view text, const ParseOptions& options = {});

// Append Python's repr of a finite double ("0.1", "1e-05", "1e+16", "100.0", "-0.0").
// Throws std::invalid_argument for NaN and infinities (as json.dumps(allow_nan=False)).
void
appendDouble(std::string& out, double value);
std::string
formatDouble(double value);

// Append a JSON string literal of valid UTF-8 text, escaped as Python's json.dumps
// (ensure_ascii) does. Throws std::invalid_argument on invalid UTF-8.
void
appendString(std::string& out, std::string_view utf8);

// The canonical text of a value (see above); object keys sorted by code point.
// Throws std::invalid_argument for a non-finite number, invalid UTF-8 or duplicate keys.
std::string
write(const Value& value);

// Whether bytes are valid UTF-8 (RFC 3629: no overlongs, surrogates or code points above
// U+10FFFF).
bool
isValidUtf8(std::string_view bytes);

} // namespace ortops::json
