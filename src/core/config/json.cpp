// The strict JSON reader (json.hpp says what it accepts and refuses): values, structure,
// strings and their escapes here; numbers in json_number.cpp, UTF-8 in utf8.cpp, the writer in
// json_write.cpp.
#include "config/json.hpp"

#include "config/json_number.hpp"
#include "config/utf8.hpp"

#include <cstring>
#include <set>

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
            if (const char* why = utf8::decode(p_ + i_, n_ - i_, len, cp)) {
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

    // A number (json_number.hpp); its errors keep the captured key's value, as every other does.
    Value number()
    {
        try {
            return detail::readNumber(p_, n_, i_);
        } catch (Error& e) {
            e.captured = captured_;
            throw;
        }
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
                utf8::append(out, u);
                continue;
            }
            size_t len;
            uint32_t cp;
            if (const char* why = utf8::decode(p_ + i_, n_ - i_, len, cp)) {
                fail(why, i_);
            }
            out.append(reinterpret_cast<const char*>(p_ + i_), len);
            i_ += len;
        }
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
        if (utf8::decode(p + i, n - i, len, cp)) {
            return false;
        }
        i += len;
    }
    return true;
}

} // namespace ortops::json
