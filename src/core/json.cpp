// The strict JSON reader and canonical writer (json.hpp says what each accepts and refuses).
//
// Numbers are read with std::from_chars and written with std::to_chars: both are exact and,
// unlike strtod / printf, do not depend on the process's locale (a host that sets LC_NUMERIC
// to a comma locale would otherwise read "0.5" as 0). libstdc++ has had both for double since
// GCC 11 (symbol version GLIBCXX_3.4.29).
#include "json.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>
#include <system_error>

namespace ortops::json {

const char*
typeName(Type type)
{
    switch (type) {
        case Type::Null: return "null";
        case Type::Bool: return "boolean";
        case Type::Integer: return "integer";
        case Type::Number: return "number";
        case Type::String: return "string";
        case Type::Array: return "array";
        case Type::Object: return "object";
    }
    return "?";
}

Value
Value::fromBool(bool b)
{
    Value v;
    v.type = Type::Bool;
    v.boolean = b;
    return v;
}

Value
Value::fromInteger(int64_t i)
{
    Value v;
    v.type = Type::Integer;
    v.integer = i;
    v.number = static_cast<double>(i);
    return v;
}

Value
Value::fromNumber(double d)
{
    Value v;
    v.type = Type::Number;
    v.number = d;
    return v;
}

Value
Value::fromString(std::string s)
{
    Value v;
    v.type = Type::String;
    v.string = std::move(s);
    return v;
}

Value
Value::array(std::vector<Value> items)
{
    Value v;
    v.type = Type::Array;
    v.items = std::move(items);
    return v;
}

Value
Value::object(std::vector<std::pair<std::string, Value>> members)
{
    Value v;
    v.type = Type::Object;
    v.members = std::move(members);
    return v;
}

const Value*
Value::find(std::string_view key) const
{
    for (const auto& [k, v] : members) {
        if (k == key) {
            return &v;
        }
    }
    return nullptr;
}

Error::Error(const std::string& message_, size_t offset_)
  : std::invalid_argument(message_ + " at byte " + std::to_string(offset_))
  , message(message_)
  , offset(offset_)
{
}

namespace {

// One UTF-8 sequence at p (n bytes left, n >= 1): its length and code point, or nullptr and
// why not.
const char*
decodeUtf8(const unsigned char* p, size_t n, size_t& length, uint32_t& cp)
{
    unsigned char b0 = p[0];
    if (b0 < 0x80) {
        length = 1;
        cp = b0;
        return nullptr;
    }
    if (b0 < 0xC0) {
        return "invalid UTF-8 (a continuation byte where a character starts)";
    }
    if (b0 < 0xC2) {
        return "invalid UTF-8 (overlong encoding)";
    }
    if (b0 > 0xF4) {
        return b0 < 0xF8 ? "invalid UTF-8 (code point above U+10FFFF)" : "invalid UTF-8 (byte 0xF8..0xFF)";
    }
    size_t need = b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
    unsigned char lo = 0x80, hi = 0xBF;
    const char* narrow = nullptr;
    if (b0 == 0xE0) {
        lo = 0xA0;
        narrow = "invalid UTF-8 (overlong encoding)";
    } else if (b0 == 0xED) {
        hi = 0x9F;
        narrow = "invalid UTF-8 (UTF-16 surrogate)";
    } else if (b0 == 0xF0) {
        lo = 0x90;
        narrow = "invalid UTF-8 (overlong encoding)";
    } else if (b0 == 0xF4) {
        hi = 0x8F;
        narrow = "invalid UTF-8 (code point above U+10FFFF)";
    }
    if (n < 2) {
        return "invalid UTF-8 (truncated sequence)";
    }
    if (p[1] < 0x80 || p[1] > 0xBF) {
        return "invalid UTF-8 (truncated sequence)";
    }
    if (p[1] < lo || p[1] > hi) {
        return narrow;
    }
    for (size_t i = 2; i < need; ++i) {
        if (i >= n || p[i] < 0x80 || p[i] > 0xBF) {
            return "invalid UTF-8 (truncated sequence)";
        }
    }
    switch (need) {
        case 2: cp = (uint32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F); break;
        case 3: cp = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F); break;
        default:
            cp = (uint32_t(b0 & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) | (uint32_t(p[2] & 0x3F) << 6) |
                 (p[3] & 0x3F);
    }
    length = need;
    return nullptr;
}

void
appendUtf8(std::string& out, uint32_t cp)
{
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string
byteText(unsigned char c)
{
    static const char* hex = "0123456789abcdef";
    if (c >= 0x20 && c < 0x7F) {
        return std::string("'") + static_cast<char>(c) + "'";
    }
    return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
}

class Parser
{
  public:
    Parser(std::string_view text, const ParseOptions& options)
      : p_(reinterpret_cast<const unsigned char*>(text.data()))
      , n_(text.size())
      , options_(options)
    {
    }

    Value run()
    {
        if (n_ > options_.maxBytes) {
            fail("input is " + std::to_string(n_) + " bytes, more than the limit of " +
                   std::to_string(options_.maxBytes),
                 options_.maxBytes);
        }
        if (n_ >= 3 && p_[0] == 0xEF && p_[1] == 0xBB && p_[2] == 0xBF) {
            fail("byte order mark (U+FEFF) before the value", 0);
        }
        skipSpace();
        if (i_ == n_) {
            fail("empty input (no value)", i_);
        }
        Value v = value(0);
        skipSpace();
        if (i_ != n_) {
            fail("trailing data after the value (" + unexpectedText() + ")", i_);
        }
        return v;
    }

  private:
    [[noreturn]] void fail(const std::string& message, size_t at)
    {
        Error e(message, at);
        e.captured = captured_;
        throw e;
    }

    std::string unexpectedText() const
    {
        if (i_ >= n_) {
            return "end of input";
        }
        return byteText(p_[i_]);
    }

    [[noreturn]] void unexpected(const char* expected)
    {
        if (i_ >= n_) {
            fail(std::string("unexpected end of input, expected ") + expected, i_);
        }
        if (p_[i_] >= 0x80) {
            size_t len;
            uint32_t cp;
            if (const char* why = decodeUtf8(p_ + i_, n_ - i_, len, cp)) {
                fail(why, i_);
            }
        }
        fail("unexpected " + byteText(p_[i_]) + ", expected " + expected, i_);
    }

    void skipSpace()
    {
        while (i_ < n_ && (p_[i_] == ' ' || p_[i_] == '\t' || p_[i_] == '\n' || p_[i_] == '\r')) {
            ++i_;
        }
    }

    bool literal(const char* word)
    {
        size_t len = std::strlen(word);
        if (n_ - i_ >= len && std::memcmp(p_ + i_, word, len) == 0) {
            i_ += len;
            return true;
        }
        return false;
    }

    Value value(int depth)
    {
        if (i_ >= n_) {
            unexpected("a value");
        }
        size_t start = i_;
        Value v;
        switch (p_[i_]) {
            case '{': v = object(depth + 1); break;
            case '[': v = array(depth + 1); break;
            case '"':
                v.type = Type::String;
                v.string = string();
                break;
            case 't':
                if (!literal("true")) {
                    unexpected("a value");
                }
                v = Value::fromBool(true);
                break;
            case 'f':
                if (!literal("false")) {
                    unexpected("a value");
                }
                v = Value::fromBool(false);
                break;
            case 'n':
                if (!literal("null")) {
                    unexpected("a value");
                }
                break;
            case 'N':
                if (literal("NaN")) {
                    fail("NaN is not JSON", start);
                }
                unexpected("a value");
            case 'I':
                if (literal("Infinity")) {
                    fail("Infinity is not JSON", start);
                }
                unexpected("a value");
            default:
                if (p_[i_] == '-' || (p_[i_] >= '0' && p_[i_] <= '9')) {
                    v = number();
                } else if (p_[i_] == '+' || p_[i_] == '.') {
                    fail(std::string("a number may not start with '") + static_cast<char>(p_[i_]) + "'", i_);
                } else {
                    unexpected("a value");
                }
        }
        v.offset = start;
        return v;
    }

    void enter(int depth, size_t at)
    {
        if (depth > options_.maxDepth) {
            fail("nesting deeper than " + std::to_string(options_.maxDepth) + " arrays/objects", at);
        }
    }

    Value object(int depth)
    {
        enter(depth, i_);
        Value v;
        v.type = Type::Object;
        ++i_;   // '{'
        skipSpace();
        if (i_ < n_ && p_[i_] == '}') {
            ++i_;
            return v;
        }
        std::set<std::string> keys;
        for (;;) {
            skipSpace();
            if (i_ >= n_ || p_[i_] != '"') {
                unexpected("a key (a string)");
            }
            size_t keyAt = i_;
            std::string key = string();
            if (!keys.insert(key).second) {
                fail("duplicate key " + quoteForMessage(key), keyAt);
            }
            skipSpace();
            if (i_ >= n_ || p_[i_] != ':') {
                unexpected("':'");
            }
            ++i_;
            skipSpace();
            Value member = value(depth);
            if (depth == 1 && !options_.captureKey.empty() && key == options_.captureKey &&
                member.type == Type::String && !captured_) {
                captured_ = member.string;
            }
            v.members.emplace_back(std::move(key), std::move(member));
            skipSpace();
            if (i_ < n_ && p_[i_] == ',') {
                ++i_;
                continue;
            }
            if (i_ < n_ && p_[i_] == '}') {
                ++i_;
                return v;
            }
            unexpected("',' or '}'");
        }
    }

    Value array(int depth)
    {
        enter(depth, i_);
        Value v;
        v.type = Type::Array;
        ++i_;   // '['
        skipSpace();
        if (i_ < n_ && p_[i_] == ']') {
            ++i_;
            return v;
        }
        for (;;) {
            skipSpace();
            v.items.push_back(value(depth));
            skipSpace();
            if (i_ < n_ && p_[i_] == ',') {
                ++i_;
                continue;
            }
            if (i_ < n_ && p_[i_] == ']') {
                ++i_;
                return v;
            }
            unexpected("',' or ']'");
        }
    }

    static int hexDigit(unsigned char c)
    {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
            return c - 'A' + 10;
        }
        return -1;
    }

    // Four hex digits after "\u" at i_ (i_ at the backslash).
    uint32_t hex4()
    {
        size_t at = i_;
        if (n_ - i_ < 6) {
            fail("truncated \\u escape", at);
        }
        uint32_t u = 0;
        for (size_t k = 2; k < 6; ++k) {
            int d = hexDigit(p_[i_ + k]);
            if (d < 0) {
                fail("\\u escape needs four hex digits", at);
            }
            u = (u << 4) | static_cast<uint32_t>(d);
        }
        i_ += 6;
        return u;
    }

    std::string string()
    {
        size_t start = i_;
        ++i_;   // '"'
        std::string out;
        for (;;) {
            if (i_ >= n_) {
                fail("unterminated string (it starts at byte " + std::to_string(start) + ")", i_);
            }
            unsigned char c = p_[i_];
            if (c == '"') {
                ++i_;
                return out;
            }
            if (c < 0x20) {
                fail("control character " + byteText(c) + " in a string (it must be escaped)", i_);
            }
            if (c == '\\') {
                if (i_ + 1 >= n_) {
                    fail("truncated escape", i_);
                }
                unsigned char e = p_[i_ + 1];
                const char* simple = nullptr;
                switch (e) {
                    case '"': simple = "\""; break;
                    case '\\': simple = "\\"; break;
                    case '/': simple = "/"; break;
                    case 'b': simple = "\b"; break;
                    case 'f': simple = "\f"; break;
                    case 'n': simple = "\n"; break;
                    case 'r': simple = "\r"; break;
                    case 't': simple = "\t"; break;
                    case 'u': break;
                    default: fail("invalid escape \\" + (e >= 0x20 && e < 0x7F ? std::string(1, char(e)) : byteText(e)), i_);
                }
                if (simple) {
                    out.push_back(simple[0]);
                    i_ += 2;
                    continue;
                }
                size_t at = i_;
                uint32_t u = hex4();
                if (u >= 0xDC00 && u <= 0xDFFF) {
                    fail("lone low surrogate in a \\u escape", at);
                }
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (n_ - i_ < 2 || p_[i_] != '\\' || p_[i_ + 1] != 'u') {
                        fail("high surrogate in a \\u escape not followed by a low surrogate", at);
                    }
                    size_t lowAt = i_;
                    uint32_t low = hex4();
                    if (low < 0xDC00 || low > 0xDFFF) {
                        fail("high surrogate in a \\u escape not followed by a low surrogate", lowAt);
                    }
                    u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00);
                }
                appendUtf8(out, u);
                continue;
            }
            size_t len;
            uint32_t cp;
            if (const char* why = decodeUtf8(p_ + i_, n_ - i_, len, cp)) {
                fail(why, i_);
            }
            out.append(reinterpret_cast<const char*>(p_ + i_), len);
            i_ += len;
        }
    }

    Value number()
    {
        size_t start = i_;
        bool negative = false;
        if (p_[i_] == '-') {
            negative = true;
            ++i_;
        }
        if (i_ >= n_ || p_[i_] < '0' || p_[i_] > '9') {
            fail("'-' not followed by a digit", start);
        }
        bool zeroMantissa = true;
        if (p_[i_] == '0') {
            ++i_;
            if (i_ < n_ && p_[i_] >= '0' && p_[i_] <= '9') {
                fail("number with a leading zero", start);
            }
        } else {
            while (i_ < n_ && p_[i_] >= '0' && p_[i_] <= '9') {
                zeroMantissa = false;
                ++i_;
            }
        }
        size_t intEnd = i_;
        bool integer = true;
        if (i_ < n_ && p_[i_] == '.') {
            integer = false;
            ++i_;
            if (i_ >= n_ || p_[i_] < '0' || p_[i_] > '9') {
                fail("'.' not followed by a digit", i_ - 1);
            }
            while (i_ < n_ && p_[i_] >= '0' && p_[i_] <= '9') {
                if (p_[i_] != '0') {
                    zeroMantissa = false;
                }
                ++i_;
            }
        }
        if (i_ < n_ && (p_[i_] == 'e' || p_[i_] == 'E')) {
            integer = false;
            ++i_;
            if (i_ < n_ && (p_[i_] == '+' || p_[i_] == '-')) {
                ++i_;
            }
            if (i_ >= n_ || p_[i_] < '0' || p_[i_] > '9') {
                fail("exponent without digits", start);
            }
            while (i_ < n_ && p_[i_] >= '0' && p_[i_] <= '9') {
                ++i_;
            }
        }
        const char* first = reinterpret_cast<const char*>(p_ + start);
        const char* last = reinterpret_cast<const char*>(p_ + i_);
        if (integer) {
            // |value| <= 2^63 (negative) or 2^63 - 1, accumulated without overflow.
            uint64_t limit = negative ? (uint64_t(1) << 63) : (uint64_t(1) << 63) - 1;
            uint64_t magnitude = 0;
            for (size_t k = start + (negative ? 1 : 0); k < intEnd; ++k) {
                uint64_t d = p_[k] - '0';
                if (magnitude > (limit - d) / 10) {
                    fail("integer " + std::string(first, last) .substr(0, 40) + " is outside int64", start);
                }
                magnitude = magnitude * 10 + d;
            }
            int64_t value;
            if (negative) {
                value = magnitude == (uint64_t(1) << 63) ? INT64_MIN : -static_cast<int64_t>(magnitude);
            } else {
                value = static_cast<int64_t>(magnitude);
            }
            return Value::fromInteger(value);
        }
        double d = 0.0;
        auto [ptr, ec] = std::from_chars(first, last, d, std::chars_format::general);
        if (ec == std::errc::result_out_of_range) {
            // libstdc++ says so for a result that would be infinite or zero (denormals are
            // stored): tell the two apart by the decimal magnitude of the number.
            if (zeroMantissa) {
                return Value::fromNumber(negative ? -0.0 : 0.0);
            }
            fail("number " + std::string(first, last).substr(0, 40) +
                   (decimalMagnitude(start, intEnd) > 0 ? " overflows a double" : " underflows to zero"),
                 start);
        }
        if (ec != std::errc() || ptr != last) {
            fail("malformed number", start);
        }
        if (!std::isfinite(d)) {
            fail("number " + std::string(first, last).substr(0, 40) + " overflows a double", start);
        }
        if (d == 0.0 && !zeroMantissa) {
            fail("number " + std::string(first, last).substr(0, 40) + " underflows to zero", start);
        }
        return Value::fromNumber(d);
    }

    // m such that the (valid, non-zero) number spanning [start, i_) is 0.d... * 10^m, saturated
    // to +-10^6 (only its sign is used).
    long decimalMagnitude(size_t start, size_t intEnd) const
    {
        size_t k = start + (p_[start] == '-' ? 1 : 0);
        long m = 0;
        if (p_[k] != '0') {
            m = static_cast<long>(intEnd - k);
            k = intEnd;
        } else {
            k = intEnd;
        }
        if (k < i_ && p_[k] == '.') {
            ++k;
            if (m == 0) {
                while (k < i_ && p_[k] == '0') {
                    --m;
                    ++k;
                }
            }
            while (k < i_ && p_[k] >= '0' && p_[k] <= '9') {
                ++k;
            }
        }
        if (k < i_ && (p_[k] == 'e' || p_[k] == 'E')) {
            ++k;
            bool neg = false;
            if (p_[k] == '+' || p_[k] == '-') {
                neg = p_[k] == '-';
                ++k;
            }
            long e = 0;
            for (; k < i_; ++k) {
                if (e < 1000000) {
                    e = e * 10 + (p_[k] - '0');
                }
            }
            m += neg ? -e : e;
        }
        return m;
    }

    static std::string quoteForMessage(const std::string& s)
    {
        std::string out = "\"";
        size_t shown = 0;
        for (unsigned char c : s) {
            if (shown++ >= 64) {
                out += "...";
                break;
            }
            if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
                out.push_back(static_cast<char>(c));
            } else {
                static const char* hex = "0123456789abcdef";
                out += "\\x";
                out.push_back(hex[c >> 4]);
                out.push_back(hex[c & 15]);
            }
        }
        out += "\"";
        return out;
    }

    const unsigned char* p_;
    size_t n_;
    size_t i_ = 0;
    const ParseOptions& options_;
    std::optional<std::string> captured_;
};

} // namespace

Value
parse(std::string_view text, const ParseOptions& options)
{
    return Parser(text, options).run();
}

bool
isValidUtf8(std::string_view bytes)
{
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    size_t n = bytes.size();
    size_t i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp;
        if (decodeUtf8(p + i, n - i, len, cp)) {
            return false;
        }
        i += len;
    }
    return true;
}

void
appendDouble(std::string& out, double value)
{
    if (!std::isfinite(value)) {
        throw std::invalid_argument("JSON has no NaN or infinity (a non-finite number to write)");
    }
    // The shortest digits that read back as the same double, in scientific form
    // ("d[.ddd]e[+-]XX"), then laid out as Python's float repr: fixed notation when the
    // decimal point falls at -4 < decpt <= 16, else d[.ddd]e[+-]XX.
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    if (ec != std::errc()) {
        throw std::invalid_argument("cannot format a number");
    }
    std::string_view sci(buf, static_cast<size_t>(end - buf));
    bool negative = false;
    if (!sci.empty() && sci[0] == '-') {
        negative = true;
        sci.remove_prefix(1);
    }
    size_t epos = sci.find('e');
    std::string digits;
    for (size_t k = 0; k < epos; ++k) {
        if (sci[k] != '.') {
            digits.push_back(sci[k]);
        }
    }
    int exp10 = 0;
    {
        std::string_view ex = sci.substr(epos + 1);
        bool eneg = ex[0] == '-';
        for (size_t k = 1; k < ex.size(); ++k) {
            exp10 = exp10 * 10 + (ex[k] - '0');
        }
        if (eneg) {
            exp10 = -exp10;
        }
    }
    while (digits.size() > 1 && digits.back() == '0') {
        digits.pop_back();
    }
    int decpt = exp10 + 1;   // value = 0.DIGITS * 10^decpt
    int nd = static_cast<int>(digits.size());
    if (negative) {
        out.push_back('-');
    }
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out += "0.";
            out.append(static_cast<size_t>(-decpt), '0');
            out += digits;
        } else if (decpt >= nd) {
            out += digits;
            out.append(static_cast<size_t>(decpt - nd), '0');
            out += ".0";
        } else {
            out.append(digits, 0, static_cast<size_t>(decpt));
            out.push_back('.');
            out.append(digits, static_cast<size_t>(decpt), std::string::npos);
        }
    } else {
        out.push_back(digits[0]);
        if (nd > 1) {
            out.push_back('.');
            out.append(digits, 1, std::string::npos);
        }
        int e = decpt - 1;
        out.push_back('e');
        out.push_back(e < 0 ? '-' : '+');
        int a = e < 0 ? -e : e;
        if (a < 10) {
            out.push_back('0');
        }
        out += std::to_string(a);
    }
}

std::string
formatDouble(double value)
{
    std::string out;
    appendDouble(out, value);
    return out;
}

void
appendString(std::string& out, std::string_view utf8)
{
    static const char* hex = "0123456789abcdef";
    auto u4 = [&](uint32_t u) {
        out += "\\u";
        out.push_back(hex[(u >> 12) & 15]);
        out.push_back(hex[(u >> 8) & 15]);
        out.push_back(hex[(u >> 4) & 15]);
        out.push_back(hex[u & 15]);
    };
    const auto* p = reinterpret_cast<const unsigned char*>(utf8.data());
    size_t n = utf8.size();
    out.push_back('"');
    size_t i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp;
        if (decodeUtf8(p + i, n - i, len, cp)) {
            throw std::invalid_argument("a string to write is not valid UTF-8");
        }
        i += len;
        switch (cp) {
            case '"': out += "\\\""; continue;
            case '\\': out += "\\\\"; continue;
            case '\n': out += "\\n"; continue;
            case '\r': out += "\\r"; continue;
            case '\t': out += "\\t"; continue;
            case '\b': out += "\\b"; continue;
            case '\f': out += "\\f"; continue;
            default: break;
        }
        if (cp >= 0x20 && cp <= 0x7E) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x10000) {
            u4(cp);
        } else {
            uint32_t v = cp - 0x10000;
            u4(0xD800 + (v >> 10));
            u4(0xDC00 + (v & 0x3FF));
        }
    }
    out.push_back('"');
}

namespace {

void
writeValue(std::string& out, const Value& v, int depth)
{
    if (depth > 64) {
        throw std::invalid_argument("a value to write is nested deeper than 64");
    }
    switch (v.type) {
        case Type::Null: out += "null"; return;
        case Type::Bool: out += v.boolean ? "true" : "false"; return;
        case Type::Integer: out += std::to_string(v.integer); return;
        case Type::Number: appendDouble(out, v.number); return;
        case Type::String: appendString(out, v.string); return;
        case Type::Array:
            out.push_back('[');
            for (size_t k = 0; k < v.items.size(); ++k) {
                if (k) {
                    out.push_back(',');
                }
                writeValue(out, v.items[k], depth + 1);
            }
            out.push_back(']');
            return;
        case Type::Object: {
            std::vector<const std::pair<std::string, Value>*> sorted;
            sorted.reserve(v.members.size());
            for (const auto& m : v.members) {
                sorted.push_back(&m);
            }
            // Byte order of UTF-8 is code point order: what Python's sort_keys gives.
            std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
            out.push_back('{');
            for (size_t k = 0; k < sorted.size(); ++k) {
                if (k) {
                    if (sorted[k]->first == sorted[k - 1]->first) {
                        throw std::invalid_argument("an object to write has a duplicate key");
                    }
                    out.push_back(',');
                }
                appendString(out, sorted[k]->first);
                out.push_back(':');
                writeValue(out, sorted[k]->second, depth + 1);
            }
            out.push_back('}');
            return;
        }
    }
}

} // namespace

std::string
write(const Value& value)
{
    std::string out;
    writeValue(out, value, 0);
    return out;
}

} // namespace ortops::json
