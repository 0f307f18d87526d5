// The activation table's lookups and the resolution of a node's activation attributes (see
// activations.hpp; the same rules and messages as ortops/activations.py).

#include "activations.hpp"

#include <cctype>
#include <stdexcept>

namespace ortops {

namespace {

std::string
lower(std::string_view s)
{
    std::string out(s);
    for (char& c : out) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

std::string
nameList()
{
    std::string out;
    for (const auto& a : ACTIVATIONS) {
        out += (out.empty() ? "" : ", ") + std::string(a.name);
    }
    return out;
}

std::string
slotNames(const Cell& c)
{
    std::string out;
    for (uint32_t i = 0; i < c.slotCount; i++) {
        out += (i ? ", " : "") + std::string(c.slots[i]);
    }
    return out;
}

} // namespace

std::optional<uint32_t>
activationCode(std::string_view name)
{
    std::string l = lower(name);
    for (uint32_t i = 0; i < ACTIVATIONS.size(); i++) {
        if (lower(ACTIVATIONS[i].name) == l) {
            return i;
        }
    }
    return std::nullopt;
}

std::vector<std::vector<Activation>>
resolveActivations(const Cell& cell,
                   uint32_t directions,
                   const std::optional<std::vector<std::string>>& given,
                   const std::optional<std::vector<double>>& alphaIn,
                   const std::optional<std::vector<double>>& betaIn)
{
    std::string op(cell.name);
    if (directions != 1 && directions != 2) {
        throw std::invalid_argument(op + ": num_directions must be 1 or 2, got " + std::to_string(directions));
    }
    const uint32_t slots = cell.slotCount;
    std::vector<std::string> names;
    if (given && !given->empty()) {
        names = *given;
    } else {
        for (uint32_t i = 0; i < slots; i++) {
            names.emplace_back(cell.defaultActivations[i]);
        }
    }
    std::vector<uint32_t> codes;
    for (size_t i = 0; i < names.size(); i++) {
        auto code = activationCode(names[i]);
        if (!code) {
            throw std::invalid_argument(op + ": activations[" + std::to_string(i) + "] must be one of " + nameList() +
                                        " (case-insensitive), got '" + names[i] + "'");
        }
        codes.push_back(*code);
    }
    size_t n = codes.size();
    bool ok = n == slots || n == static_cast<size_t>(slots) * directions ||
              (op == "RNN" && directions == 1 && n == 2);
    if (!ok) {
        std::string expected;
        if (directions == 2) {
            expected = std::to_string(slots) + " names (" + slotNames(cell) + "; used for both directions) or " +
                       std::to_string(2 * slots) + " (forward then reverse) for a bidirectional layer";
        } else if (op == "RNN") {
            expected = "1 name (f; 2 are accepted and the first used, as ORT does) for one direction";
        } else {
            expected = std::to_string(slots) + " names (" + slotNames(cell) + ") for one direction";
        }
        throw std::invalid_argument(op + ": activations must list " + expected + ", got " + std::to_string(n));
    }
    std::vector<double> alphas = alphaIn.value_or(std::vector<double>{});
    std::vector<double> betas = betaIn.value_or(std::vector<double>{});
    size_t ai = 0, bi = 0;
    std::vector<Activation> resolved;
    for (uint32_t code : codes) {
        const ActivationInfo& info = ACTIVATIONS[code];
        Activation a;
        a.code = code;
        if (info.takesAlpha) {
            a.alpha = ai < alphas.size() ? static_cast<float>(alphas[ai++]) : info.defaultAlpha;
        }
        if (info.takesBeta) {
            a.beta = bi < betas.size() ? static_cast<float>(betas[bi++]) : info.defaultBeta;
        }
        resolved.push_back(a);
    }
    if (resolved.size() == 2 && slots == 1 && directions == 1) {
        resolved.resize(1);
    }
    std::vector<std::vector<Activation>> out;
    for (uint32_t d = 0; d < directions; d++) {
        if (resolved.size() == slots) {
            out.push_back(resolved);
        } else {
            out.emplace_back(resolved.begin() + d * slots, resolved.begin() + (d + 1) * slots);
        }
    }
    return out;
}

} // namespace ortops
