// The decoder's native unit test, without libFuzzer: runs the fuzz target's checks
// (fuzz_nodeconfig.cpp, linked in) over every file of the given directories or files, then a
// few fixed cases of the JSON reader and writer. A corpus file named ok-* must decode and
// encode back to exactly its own bytes (the corpus holds canonical configs); one named bad-*
// must be refused. Any other name (libFuzzer's hashes, tests/fuzz/regressions/) only has to
// pass the target's checks. scripts/ci/fuzz.sh --replay builds it with ASan and UBSan (g++ or
// clang++) and runs it over tests/fuzz/corpus/nodeconfig and tests/fuzz/regressions.
//
//     replay [--doubles tests/fuzz/doubles.txt] DIR_OR_FILE...      exit status 0: all passed
// (--doubles: the JSON writer's float format against Python's repr of 4000 doubles over the
// whole range, tests/fuzz/make_corpus.py writes the file)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "core/config/json.hpp"
#include "core/config/nodeconfig.hpp"

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int failures = 0;

void
fail(const std::string& what)
{
    std::fprintf(stderr, "replay: FAIL %s\n", what.c_str());
    ++failures;
}

std::string
readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void
files(const std::string& path, std::vector<std::string>& out)
{
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        fail(path + ": no such file or directory");
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        out.push_back(path);
        return;
    }
    DIR* dir = opendir(path.c_str());
    if (!dir) {
        fail(path + ": cannot read the directory");
        return;
    }
    std::vector<std::string> names;
    while (dirent* e = readdir(dir)) {
        std::string name = e->d_name;
        if (name != "." && name != ".." && name[0] != '.' && name != "README.md") {
            names.push_back(name);
        }
    }
    closedir(dir);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
        files(path + "/" + name, out);
    }
}

std::string
baseName(const std::string& path)
{
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

void
replay(const std::string& path)
{
    std::string bytes = readFile(path);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    std::string name = baseName(path);
    if (name.rfind("ok-", 0) == 0) {
        try {
            std::string canonical = ortops::encodeNodeConfig(ortops::decodeNodeConfig(bytes));
            if (canonical != bytes) {
                fail(path + ": decodes, but is not canonical; the encoding is\n" + canonical);
            }
        } catch (const ortops::ConfigError& e) {
            fail(path + ": refused: " + e.what());
        }
    } else if (name.rfind("bad-", 0) == 0) {
        try {
            ortops::decodeNodeConfig(bytes);
            fail(path + ": accepted");
        } catch (const ortops::ConfigError&) {
        }
    }
}

void
expectDouble(double value, const char* python)
{
    std::string got = ortops::json::formatDouble(value);
    if (got != python) {
        fail("formatDouble: Python's repr is " + std::string(python) + ", got " + got);
    }
}

void
expectJson(const std::string& text, bool valid, const char* what)
{
    try {
        ortops::json::parse(text);
        if (!valid) {
            fail(std::string("json: accepted ") + what);
        }
    } catch (const ortops::json::Error& e) {
        if (valid) {
            fail(std::string("json: refused ") + what + ": " + e.what());
        }
    }
}

void
fixedCases()
{
    expectDouble(0.1, "0.1");
    expectDouble(1e-05, "1e-05");
    expectDouble(0.0001, "0.0001");
    expectDouble(1e16, "1e+16");
    expectDouble(1e15, "1000000000000000.0");
    expectDouble(9999999999999998.0, "9999999999999998.0");
    expectDouble(100.0, "100.0");
    expectDouble(-0.0, "-0.0");
    expectDouble(0.0, "0.0");
    expectDouble(2.5, "2.5");
    expectDouble(1.0 / 3.0, "0.3333333333333333");
    expectDouble(5e-324, "5e-324");
    expectDouble(1.7976931348623157e308, "1.7976931348623157e+308");
    expectDouble(123456789012345678.0, "1.2345678901234568e+17");
    expectDouble(-1.5e-7, "-1.5e-07");
    expectDouble(static_cast<double>(0.1f), "0.10000000149011612");

    expectJson(std::string(16, '[') + std::string(16, ']'), true, "16 nested arrays");
    expectJson(std::string(17, '[') + std::string(17, ']'), false, "17 nested arrays");
    expectJson(std::string(ortops::json::DEFAULT_MAX_BYTES - 1, ' ') + "0", true, "64 KiB");
    expectJson(std::string(ortops::json::DEFAULT_MAX_BYTES, ' ') + "0", false, "64 KiB + 1 byte");
    expectJson("9223372036854775807", true, "INT64_MAX");
    expectJson("-9223372036854775808", true, "INT64_MIN");
    expectJson("9223372036854775808", false, "INT64_MAX + 1");
    expectJson("-9223372036854775809", false, "INT64_MIN - 1");
    expectJson("1e400", false, "a number that overflows");
    expectJson("1e-400", false, "a number that underflows to zero");
    expectJson("0e400", true, "zero with a large exponent");
    expectJson("4.9e-324", true, "the smallest denormal");
    expectJson("01", false, "a leading zero");
    expectJson("NaN", false, "NaN");
    expectJson("\"\\ud800\"", false, "a lone high surrogate");
    expectJson("\"\\udc00\"", false, "a lone low surrogate");
    expectJson("\"\\ud83d\\ude00\"", true, "a surrogate pair");
    expectJson("\"\xed\xa0\x80\"", false, "an encoded surrogate");
    expectJson("\"\xc0\xaf\"", false, "an overlong");
    expectJson("\"\xf4\x90\x80\x80\"", false, "a code point above U+10FFFF");
    expectJson("{\"a\":1,\"a\":1}", false, "a duplicate key");
    expectJson("{} x", false, "trailing data");
    expectJson("\"\t\"", false, "a raw tab in a string");

    ortops::json::Value v = ortops::json::parse("{\"b\":[1,2.0,\"\xc3\xa9\\u0001\"],\"a\":null}");
    std::string w = ortops::json::write(v);
    if (w != "{\"a\":null,\"b\":[1,2.0,\"\\u00e9\\u0001\"]}") {
        fail("json::write: " + w);
    }
}

// Lines "<hex bits> <Python repr>" (tests/fuzz/doubles.txt, from make_corpus.py).
void
doubles(const std::string& path)
{
    std::ifstream in(path);
    std::string bits, repr;
    size_t n = 0;
    while (in >> bits >> repr) {
        uint64_t u = std::stoull(bits, nullptr, 16);
        double d;
        std::memcpy(&d, &u, sizeof d);
        std::string got = ortops::json::formatDouble(d);
        if (got != repr) {
            fail("formatDouble(" + bits + "): Python's repr is " + repr + ", got " + got);
        }
        ++n;
    }
    if (n < 1000) {
        fail(path + ": expected at least 1000 doubles, read " + std::to_string(n));
    }
    std::printf("replay: %zu doubles formatted as Python's repr\n", n);
}

} // namespace

int
main(int argc, char** argv)
{
    fixedCases();
    std::vector<std::string> paths;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--doubles" && i + 1 < argc) {
            doubles(argv[++i]);
            continue;
        }
        files(argv[i], paths);
    }
    for (const std::string& path : paths) {
        replay(path);
    }
    std::printf("replay: %zu files, fixed cases; %d failure(s)\n", paths.size(), failures);
    return failures ? 1 : 0;
}
