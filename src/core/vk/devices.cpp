// Device choice and the shared contexts (see devices.hpp).

#include "vk/devices.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>

#include "base/text.hpp"

namespace ortops {

namespace {

using text::lower;
using text::trim;

std::string
listing()
{
    std::string out;
    for (const auto& d : devices()) {
        if (!out.empty()) {
            out += "; ";
        }
        out += "[" + std::to_string(d.index) + "] " + d.name + " (" + d.type + ") uuid " + d.uuid;
    }
    return out;
}

// The UUID digits `text` stands for, or nothing when it does not look like a UUID (at
// least 8 hex digits; any number after "GPU-").
std::optional<std::string>
uuidPrefix(const std::string& text)
{
    std::string t = lower(trim(text));
    bool explicitPrefix = t.rfind("gpu-", 0) == 0;
    if (explicitPrefix) {
        t = t.substr(4);
    }
    std::string digits;
    for (char ch : t) {
        if (ch == '-') {
            continue;
        }
        if (!std::isxdigit(static_cast<unsigned char>(ch))) {
            return std::nullopt;
        }
        digits += ch;
    }
    if (digits.empty() || digits.size() > 32 || (!explicitPrefix && digits.size() < 8)) {
        return std::nullopt;
    }
    return digits;
}

int
preference(const std::string& type)
{
    static const char* order[] = { "discrete", "integrated", "virtual", "cpu", "other" };
    for (int i = 0; i < 5; i++) {
        if (type == order[i]) {
            return i;
        }
    }
    return 5;
}

const DeviceDescription&
match(const std::string& spec)
{
    const auto& found = devices();
    std::string text = trim(spec);
    if (!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        unsigned long index = std::strtoul(text.c_str(), nullptr, 10);
        for (const auto& d : found) {
            if (d.index == index) {
                return d;
            }
        }
        throw std::invalid_argument("ortops: no Vulkan device with index " + text + "; devices: " + listing());
    }
    if (auto digits = uuidPrefix(text)) {
        const DeviceDescription* hit = nullptr;
        int hits = 0;
        for (const auto& d : found) {
            std::string u;
            for (char ch : d.uuid) {
                if (ch != '-') {
                    u += ch;
                }
            }
            if (u.rfind(*digits, 0) == 0) {
                hit = &d;
                hits++;
            }
        }
        if (hits == 1) {
            return *hit;
        }
        if (hits == 0) {
            throw std::invalid_argument("ortops: no Vulkan device has a UUID starting with '" + text +
                                        "'; devices: " + listing());
        }
        throw std::invalid_argument("ortops: the UUID prefix '" + text + "' matches " + std::to_string(hits) +
                                    " Vulkan devices (give more digits); devices: " + listing());
    }
    std::string l = lower(text);
    for (const auto& d : found) {
        if (d.type == l) {
            return d;
        }
    }
    for (const auto& d : found) {
        if (lower(d.name).find(l) != std::string::npos) {
            return d;
        }
    }
    throw std::invalid_argument("ortops: no Vulkan device matches '" + text +
                                "' (an index, a type such as 'discrete' or 'cpu', a UUID or its prefix, "
                                "or part of a name); devices: " + listing());
}

std::mutex g_contextsLock;
// Never destroyed: a context may still be in use while static destructors run at exit (a
// custom-op library unloaded after the Vulkan loader), and the process's end frees it.
auto* g_contexts = new std::map<uint32_t, std::shared_ptr<Context>>();

} // namespace

const std::vector<DeviceDescription>&
devices()
{
    static const std::vector<DeviceDescription> found = enumerateDevices();
    return found;
}

const DeviceDescription&
chooseDevice(const std::optional<std::string>& spec)
{
    const auto& found = devices();
    if (found.empty()) {
        throw std::runtime_error(
          "ortops: no Vulkan device with a compute queue was found (install a Vulkan driver: "
          "your GPU's, or Mesa's lavapipe, Debian package mesa-vulkan-drivers)");
    }
    if (spec && !trim(*spec).empty()) {
        return match(*spec);
    }
    const char* env = std::getenv("ORTOPS_DEVICE");
    if (env && !trim(env).empty()) {
        return match(env);
    }
    return *std::min_element(found.begin(), found.end(), [](const auto& a, const auto& b) {
        return std::make_pair(preference(a.type), a.index) < std::make_pair(preference(b.type), b.index);
    });
}

bool
validationRequested()
{
    const char* env = std::getenv("ORTOPS_VALIDATION");
    if (!env) {
        return false;
    }
    std::string v = lower(trim(env));
    return !(v.empty() || v == "0" || v == "false" || v == "no");
}

uint32_t
requestedQueues()
{
    const char* env = std::getenv("ORTOPS_QUEUES");
    if (!env || trim(env).empty()) {
        return 1;
    }
    std::string v = trim(env);
    if (!std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
        v.size() > 4 || std::stoul(v) < 1) {
        throw std::invalid_argument("ortops: ORTOPS_QUEUES must be a positive integer, got '" + v + "'");
    }
    return static_cast<uint32_t>(std::stoul(v));
}

std::shared_ptr<Context>
sharedContext(uint32_t index, bool validation, uint32_t maxQueues)
{
    std::lock_guard<std::mutex> lock(g_contextsLock);
    auto& ctx = (*g_contexts)[index];
    if (!ctx || ctx->lost.load()) {
        ctx = std::make_shared<Context>(index, validation, maxQueues);
    }
    return ctx;
}

} // namespace ortops
