// libFuzzer target for the node-config decoder (src/core/config/nodeconfig.hpp) and the strict JSON
// reader under it (src/core/config/json.hpp). Built by scripts/ci/fuzz.sh with
// -fsanitize=fuzzer,address,undefined; tests/fuzz/replay.cpp runs the same checks over the
// corpus and tests/fuzz/regressions/ without libFuzzer. For any bytes:
//   - decodeNodeConfig either returns or throws ConfigError (anything else escaping, a crash,
//     a leak or undefined behaviour is a finding); a message starts "ortops node config: " and
//     is printable ASCII (the node's name and every other piece of the input are escaped);
//   - a decoded config encodes to text that decodes again and encodes to the same text
//     (round trip), and that text is what the decoder considers canonical;
//   - json::parse either returns or throws json::Error; a parsed value writes to text that
//     parses and writes to the same text again.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/config/json.hpp"
#include "core/config/nodeconfig.hpp"

namespace {

[[noreturn]] void
finding(const char* what, const std::string& detail)
{
    std::fprintf(stderr, "fuzz_nodeconfig: %s\n%s\n", what, detail.c_str());
    std::abort();
}

bool
printableAscii(std::string_view s)
{
    for (unsigned char c : s) {
        if (c < 0x20 || c > 0x7E) {
            return false;
        }
    }
    return true;
}

void
checkJson(std::string_view text)
{
    ortops::json::Value v;
    try {
        v = ortops::json::parse(text);
    } catch (const ortops::json::Error& e) {
        if (!printableAscii(e.what())) {
            finding("a JSON error message that is not printable ASCII", e.what());
        }
        return;
    }
    std::string once = ortops::json::write(v);   // parse gives finite numbers, valid UTF-8
    ortops::json::Value again = ortops::json::parse(once);
    std::string twice = ortops::json::write(again);
    if (once != twice) {
        finding("JSON write -> parse -> write changed the text", once + "\n" + twice);
    }
}

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    std::string_view text(reinterpret_cast<const char*>(data), size);
    checkJson(text);

    ortops::NodeConfig config;
    try {
        config = ortops::decodeNodeConfig(text);
    } catch (const ortops::ConfigError& e) {
        std::string_view message = e.what();
        if (message.rfind("ortops node config: ", 0) != 0) {
            finding("a ConfigError without the prefix", std::string(message));
        }
        if (!printableAscii(message)) {
            finding("a ConfigError message that is not printable ASCII", std::string(message));
        }
        return 0;
    }
    if (!config.cell || config.outputs.empty() || config.version != ortops::NODE_CONFIG_VERSION) {
        finding("a decoded config breaks an invariant", std::string(text));
    }
    for (const std::string& output : config.outputs) {
        if (!config.wants(output) || !config.cell->hasOutput(output)) {
            finding("outputs holds what the op does not have", std::string(text));
        }
    }
    for (const std::string& input : config.absent) {
        if (!config.isAbsent(input) || !config.cell->hasInput(input) || input == "X" || input == "W" || input == "R") {
            finding("absent holds what is not an optional input of the op", std::string(text));
        }
    }
    if (config.wants("") || config.isAbsent("")) {
        finding("wants/isAbsent accept the empty name", std::string(text));
    }
    std::string once = ortops::encodeNodeConfig(config);
    ortops::NodeConfig again;
    try {
        again = ortops::decodeNodeConfig(once);
    } catch (const ortops::ConfigError& e) {
        finding("the encoding of a decoded config is refused", once + "\n" + e.what());
    }
    std::string twice = ortops::encodeNodeConfig(again);
    if (once != twice) {
        finding("encode -> decode -> encode changed the text", once + "\n" + twice);
    }
    return 0;
}
