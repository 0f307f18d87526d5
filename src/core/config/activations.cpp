// activationCode and resolveActivations (activations.hpp): the rules and the messages of
// ortops/activations.py's resolve_activations, which tests/test_node_config_decoder.py
// compares them with. Two differences, both on input no converter writes: names match
// case-insensitively in ASCII only (Python's str.lower() also folds U+212A KELVIN SIGN to
// 'k', so it takes "Lea\u212Ayrelu"), and a name in a message is shown as Python's ascii()
// would show it (every non-ASCII character escaped), cut after 64 characters.
#include "config/activations.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace ortops {

namespace {

char
lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool
equalsIgnoringAsciiCase(std::string_view a, std::string_view b)
{
    if (a.size() != b.size()) {
        return false;
    }
    for (size_t i = 0; i < a.size(); ++i) {
        if (lower(a[i]) != lower(b[i])) {
            return false;
        }
    }
    return true;
}

// float(np.float32(x)): round to nearest float32; magnitudes from 2^128 * (1 - 2^-25) on
// become infinite (without the undefined behaviour of converting an out-of-range double).
float
toFloat32(double x)
{
    if (std::isfinite(x) && std::fabs(x) >= 0x1.ffffffp127) {
        return std::copysign(std::numeric_limits<float>::infinity(), static_cast<float>(x > 0 ? 1 : -1));
    }
    return static_cast<float>(x);
}

// Python's repr of a str, in the style of ascii(): quotes as Python picks them, escapes for
// the backslash, the quote, \t \n \r, \xNN below 0x20 and from 0x7f to 0xff, \uNNNN and
// \UNNNNNNNN above; bytes that are not UTF-8 as \xNN too (cannot happen after the decoder).
std::string
pyRepr(std::string_view s)
{
    static const char* hex = "0123456789abcdef";
    bool hasSingle = s.find('\'') != std::string_view::npos;
    bool hasDouble = s.find('"') != std::string_view::npos;
    char quote = (hasSingle && !hasDouble) ? '"' : '\'';
    std::string out(1, quote);
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t n = s.size();
    size_t shown = 0;
    for (size_t i = 0; i < n;) {
        if (shown++ == 64) {
            out += "...";
            break;
        }
        uint32_t cp = p[i];
        size_t len = 1;
        bool valid = true;
        if (cp >= 0x80) {
            size_t need = cp >= 0xF0 ? 4 : cp >= 0xE0 ? 3 : cp >= 0xC0 ? 2 : 0;
            if (need == 0 || i + need > n) {
                valid = false;
            } else {
                cp &= need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07;
                for (size_t k = 1; k < need; ++k) {
                    if ((p[i + k] & 0xC0) != 0x80) {
                        valid = false;
                        break;
                    }
                    cp = (cp << 6) | (p[i + k] & 0x3F);
                }
                len = need;
            }
            if (!valid) {
                cp = p[i];
                len = 1;
            }
        }
        i += len;
        if (cp == '\\' || static_cast<char>(cp) == quote) {
            out.push_back('\\');
            out.push_back(static_cast<char>(cp));
        } else if (cp == '\t') {
            out += "\\t";
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp >= 0x20 && cp < 0x7F) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x100) {
            out += "\\x";
            out.push_back(hex[cp >> 4]);
            out.push_back(hex[cp & 15]);
        } else {
            int digits = cp < 0x10000 ? 4 : 8;
            out += digits == 4 ? "\\u" : "\\U";
            for (int k = digits - 1; k >= 0; --k) {
                out.push_back(hex[(cp >> (4 * k)) & 15]);
            }
        }
    }
    out.push_back(quote);
    return out;
}

std::string
activationList()
{
    std::string out;
    for (size_t i = 0; i < ACTIVATIONS.size(); ++i) {
        if (i) {
            out += ", ";
        }
        out += ACTIVATIONS[i].name;
    }
    return out;
}

std::string
slotNames(const Cell& cell)
{
    std::string out;
    for (uint32_t i = 0; i < cell.slotCount; ++i) {
        if (i) {
            out += ", ";
        }
        out += cell.slots[i];
    }
    return out;
}

// The float32 values of activation_alpha or activation_beta (none when absent).
std::vector<float>
float32List(const std::optional<std::vector<double>>& values)
{
    std::vector<float> out;
    if (values) {
        for (double v : *values) {
            out.push_back(toFloat32(v));
        }
    }
    return out;
}

// The activation codes of the names given, or of the cell's defaults (one per slot) when none
// are: each name from the one table, matched case-insensitively, else an error naming its index.
std::vector<uint32_t>
namedCodes(const Cell& cell, const std::optional<std::vector<std::string>>& names)
{
    const std::string op(cell.name);
    std::vector<uint32_t> codes;
    if (names && !names->empty()) {
        for (size_t i = 0; i < names->size(); ++i) {
            std::optional<uint32_t> code = activationCode((*names)[i]);
            if (!code) {
                throw std::invalid_argument(op + ": activations[" + std::to_string(i) + "] must be one of " +
                                            activationList() + " (case-insensitive), got " + pyRepr((*names)[i]));
            }
            codes.push_back(*code);
        }
    } else {
        for (uint32_t i = 0; i < cell.slotCount; ++i) {
            codes.push_back(*activationCode(cell.defaultActivations[i]));
        }
    }
    return codes;
}

// Each activation with its alpha and beta: the activations that take one consume the given
// values in order (ONNX's rule), the default of the table when the list runs out.
std::vector<Activation>
withParameters(const std::vector<uint32_t>& codes, const std::vector<float>& alphas, const std::vector<float>& betas)
{
    size_t alphaCursor = 0, betaCursor = 0;
    std::vector<Activation> resolved;
    for (uint32_t code : codes) {
        const ActivationInfo& info = ACTIVATIONS[code];
        Activation a;
        a.code = code;
        if (info.takesAlpha) {
            a.alpha = alphaCursor < alphas.size() ? alphas[alphaCursor++] : info.defaultAlpha;
        }
        if (info.takesBeta) {
            a.beta = betaCursor < betas.size() ? betas[betaCursor++] : info.defaultBeta;
        }
        resolved.push_back(a);
    }
    return resolved;
}

// The activations of each direction: one list of slots used for every direction, or one per
// direction (forward then reverse). An RNN's second name for one direction is dropped, as ORT
// does.
std::vector<std::vector<Activation>>
perDirection(std::vector<Activation> resolved, uint32_t slots, uint32_t directions)
{
    if (resolved.size() == 2 && slots == 1 && directions == 1) {
        resolved.resize(1);
    }
    std::vector<std::vector<Activation>> out;
    for (uint32_t d = 0; d < directions; ++d) {
        if (resolved.size() == slots) {
            out.push_back(resolved);
        } else {
            out.emplace_back(resolved.begin() + d * slots, resolved.begin() + (d + 1) * slots);
        }
    }
    return out;
}

} // namespace

std::optional<uint32_t>
activationCode(std::string_view name)
{
    for (size_t i = 0; i < ACTIVATIONS.size(); ++i) {
        if (equalsIgnoringAsciiCase(name, ACTIVATIONS[i].name)) {
            return static_cast<uint32_t>(i);
        }
    }
    return std::nullopt;
}

std::vector<std::vector<Activation>>
resolveActivations(const Cell& cell,
                   uint32_t directions,
                   const std::optional<std::vector<std::string>>& names,
                   const std::optional<std::vector<double>>& alpha,
                   const std::optional<std::vector<double>>& beta)
{
    const std::string op(cell.name);
    if (directions != 1 && directions != 2) {
        throw std::invalid_argument(op + ": num_directions must be 1 or 2, got " + std::to_string(directions));
    }
    const uint32_t slots = cell.slotCount;
    const std::vector<uint32_t> codes = namedCodes(cell, names);

    size_t count = codes.size();
    bool allowed = count == slots || count == size_t(slots) * directions ||
                   (cell.op == Op::RNN && directions == 1 && count == 2);
    if (!allowed) {
        std::string expected;
        if (directions == 2) {
            expected = std::to_string(slots) + " names (" + slotNames(cell) + "; used for both directions) or " +
                       std::to_string(2 * slots) + " (forward then reverse) for a bidirectional layer";
        } else if (cell.op == Op::RNN) {
            expected = "1 name (f; 2 are accepted and the first used, as ORT does) for one direction";
        } else {
            expected = std::to_string(slots) + " names (" + slotNames(cell) + ") for one direction";
        }
        std::string list = "[";
        for (size_t i = 0; i < count; ++i) {
            if (i) {
                list += ", ";
            }
            list += "'" + std::string(ACTIVATIONS[codes[i]].name) + "'";
        }
        list += "]";
        throw std::invalid_argument(op + ": activations must list " + expected + ", got " + std::to_string(count) +
                                    ": " + list);
    }

    std::vector<Activation> resolved = withParameters(codes, float32List(alpha), float32List(beta));
    return perDirection(std::move(resolved), slots, directions);
}

} // namespace ortops
