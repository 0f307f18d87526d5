// The canonical JSON writer (json.hpp: what Python's json.dumps(sort_keys=True,
// separators=(",", ":"), allow_nan=False) writes) and Python's float repr.
//
// Why it is in the shipping build, not only the tests': encodeNodeConfig writes with it (the
// config of each node the EP takes, for the placement report: placement/decisions.hpp), and the
// config's messages show numbers with formatDouble. The fuzzers' round trips use it too.
//
// Numbers are written with std::to_chars, which is exact and, unlike printf, does not depend on
// the process's locale. libstdc++ has had it for double since GCC 11 (GLIBCXX_3.4.29).
#include "config/json.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include "config/utf8.hpp"

namespace ortops::json {

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
        if (utf8::decode(p + i, n - i, len, cp)) {
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
