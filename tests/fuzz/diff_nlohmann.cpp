// The measurement behind keeping the JSON reader (docs/security.md, "The JSON reader: kept"):
// a differential libFuzzer target, the kept reader (ortops::json::parse) against a candidate,
// nlohmann/json 3.11.2's SAX parser with a handler that keeps the reader's rules. Any input one
// accepts and the other refuses, or that they read to different values (numbers bit for bit),
// aborts with both messages. Not built by CI (it needs nlohmann-json3-dev); to re-run it:
//
//   clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Isrc -Isrc/core \
//     tests/fuzz/diff_nlohmann.cpp src/core/config/json.cpp src/core/config/json_number.cpp \
//     src/core/config/json_write.cpp src/core/config/utf8.cpp -o build/fuzz/diff_nlohmann
//   mkdir -p build/fuzz/diff && cp tests/fuzz/corpus/nodeconfig/* tests/fuzz/regressions/* build/fuzz/diff/
//   build/fuzz/diff_nlohmann -dict=tests/fuzz/nodeconfig.dict -max_len=8192 -max_total_time=60 build/fuzz/diff
//
// Its one finding (a NUL byte, which nlohmann's lexer takes for the end of the input) is
// answered by the pre-check in cand::parse; without it the run stops within seconds.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/config/json.hpp"

namespace cand {

// The candidate reader: json.hpp's rules on nlohmann's SAX events.

using ortops::json::Error;
using ortops::json::ParseOptions;
using ortops::json::Type;
using ortops::json::Value;
using nlohmann::json;

class Strict : public nlohmann::json_sax<json>
{
  public:
    explicit Strict(const ParseOptions& o) : options_(o) {}
    Value root;
    std::string error;

    bool null() override { return put(Value::null()); }
    bool boolean(bool b) override { return put(Value::fromBool(b)); }
    bool number_integer(number_integer_t i) override { return put(Value::fromInteger(i)); }
    bool number_unsigned(number_unsigned_t u) override
    {
        if (u > uint64_t(INT64_MAX)) {
            return refuse("integer outside int64");
        }
        return put(Value::fromInteger(static_cast<int64_t>(u)));
    }
    bool number_float(number_float_t d, const string_t& text) override
    {
        if (text.find_first_of(".eE") == std::string::npos) {
            return refuse("integer outside int64");   // nlohmann reads it as a double
        }
        if (d == 0.0) {
            size_t e = text.find_first_of("eE");
            if (text.substr(0, e).find_first_of("123456789") != std::string::npos) {
                return refuse("underflows to zero");
            }
        }
        return put(Value::fromNumber(d));
    }
    bool string(string_t& s) override { return put(Value::fromString(s)); }
    bool binary(binary_t&) override { return refuse("binary"); }
    bool start_object(std::size_t) override
    {
        if (stack_.size() + 1 > size_t(options_.maxDepth)) {
            return refuse("nesting too deep");
        }
        stack_.push_back(Value::object());
        keys_.emplace_back();
        outerKeys_.push_back(key_);
        return true;
    }
    bool key(string_t& k) override
    {
        if (!keys_.back().insert(k).second) {
            return refuse("duplicate key");
        }
        key_ = k;
        return true;
    }
    bool end_object() override
    {
        keys_.pop_back();
        key_ = outerKeys_.back();
        outerKeys_.pop_back();
        Value v = std::move(stack_.back());
        stack_.pop_back();
        return put(std::move(v));
    }
    bool start_array(std::size_t) override
    {
        if (stack_.size() + 1 > size_t(options_.maxDepth)) {
            return refuse("nesting too deep");
        }
        stack_.push_back(Value::array());
        keys_.emplace_back();
        outerKeys_.push_back(key_);
        return true;
    }
    bool end_array() override { return end_object(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override
    {
        return refuse(ex.what());
    }

  private:
    bool refuse(const std::string& why)
    {
        error = why;
        return false;
    }
    bool put(Value v)
    {
        if (stack_.empty()) {
            root = std::move(v);
        } else if (stack_.back().type == Type::Array) {
            stack_.back().items.push_back(std::move(v));
        } else {
            stack_.back().members.emplace_back(key_, std::move(v));
        }
        return true;
    }
    const ParseOptions& options_;
    std::vector<Value> stack_;
    std::vector<std::set<std::string>> keys_;
    std::string key_;
    std::vector<std::string> outerKeys_;
};

Value
parse(std::string_view text, const ParseOptions& options)
{
    if (text.size() > options.maxBytes) {
        throw Error("input too long", options.maxBytes);
    }
    if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") {
        throw Error("byte order mark", 0);   // nlohmann skips one
    }
    if (text.find('\0') != std::string_view::npos) {
        throw Error("NUL byte", text.find('\0'));   // nlohmann's lexer takes it for the end of input
    }
    Strict sax(options);
    bool ok = json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json, true);
    if (!ok) {
        throw Error(sax.error, 0);
    }
    return std::move(sax.root);
}

} // namespace cand

using ortops::json::Value;

static bool
same(const Value& a, const Value& b)
{
    using ortops::json::Type;
    if (a.type != b.type) {
        return false;
    }
    switch (a.type) {
        case Type::Null: return true;
        case Type::Bool: return a.boolean == b.boolean;
        case Type::Integer: return a.integer == b.integer;
        case Type::Number: return std::memcmp(&a.number, &b.number, sizeof(double)) == 0;   // bit for bit
        case Type::String: return a.string == b.string;
        case Type::Array:
            return a.items.size() == b.items.size() &&
                   std::equal(a.items.begin(), a.items.end(), b.items.begin(), same);
        case Type::Object:
            return a.members.size() == b.members.size() &&
                   std::equal(a.members.begin(), a.members.end(), b.members.begin(), [](const auto& x, const auto& y) {
                       return x.first == y.first && same(x.second, y.second);
                   });
    }
    return false;
}

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    std::string_view text(reinterpret_cast<const char*>(data), size);
    std::string e1, e2;
    Value v1, v2;
    bool ok1 = true, ok2 = true;
    try {
        v1 = ortops::json::parse(text);
    } catch (const std::exception& e) {
        ok1 = false;
        e1 = e.what();
    }
    try {
        v2 = cand::parse(text, {});
    } catch (const std::exception& e) {
        ok2 = false;
        e2 = e.what();
    }
    if (ok1 != ok2 || (ok1 && !same(v1, v2))) {
        std::fprintf(stderr, "DISAGREE: kept %s [%s], nlohmann %s [%s]\n", ok1 ? "accepts" : "refuses", e1.c_str(),
                     ok2 ? "accepts" : "refuses", e2.c_str());
        std::abort();
    }
    return 0;
}
