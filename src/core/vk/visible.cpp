// CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES -> Vulkan devices (visible.hpp says the rules).
#include "vk/visible.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "vk/devices.hpp"

#include "base/text.hpp"

namespace ortops {

namespace {

using text::lower;
using text::trim;

// A comma-separated list, blanks around entries and empty entries dropped.
std::vector<std::string>
entries(const std::string& text)
{
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        std::string e = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (!e.empty()) {
            out.push_back(e);
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    return out;
}

bool
allDigits(const std::string& s)
{
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::string
withoutDashes(const std::string& s)
{
    std::string out;
    for (char ch : s) {
        if (ch != '-') {
            out += ch;
        }
    }
    return out;
}

// PCI bus id "dddd:bb:dd.f" as numbers (hex fields), for sorting.
std::vector<unsigned long>
pciKey(const std::string& bus)
{
    std::vector<unsigned long> key;
    std::string field;
    for (char ch : bus + ":") {
        if (ch == ':' || ch == '.') {
            key.push_back(std::strtoul(field.c_str(), nullptr, 16));
            field.clear();
        } else {
            field += ch;
        }
    }
    return key;
}

// "label GPU-uuid; ..." (with "i: " before each when numbered), or "none".
std::string
listing(const std::vector<VisibleDevice>& found, const std::vector<size_t>& gpus, bool numbered)
{
    std::string out;
    for (size_t i = 0; i < gpus.size(); ++i) {
        out += (i ? "; " : "") + (numbered ? std::to_string(i) + ": " : std::string()) + found[gpus[i]].label +
               " GPU-" + found[gpus[i]].uuid;
    }
    return out.empty() ? "none" : out;
}

struct Picker
{
    const std::vector<VisibleDevice>& found;
    const std::vector<size_t>& gpus;    // in CUDA order: an index counts in it
    const char* variable;

    size_t byUuid(const std::string& entry) const
    {
        std::string text = lower(entry);
        std::string digits = withoutDashes(text.rfind("gpu-", 0) == 0 ? text.substr(4) : text);
        std::vector<size_t> hits;
        for (size_t g : gpus) {
            if (withoutDashes(found[g].uuid).rfind(digits, 0) == 0) {
                hits.push_back(g);
            }
        }
        if (hits.size() != 1) {
            std::string what = hits.empty() ? "no" : std::to_string(hits.size());
            throw std::invalid_argument(std::string("ortops: ") + variable + " names '" + entry + "', which matches " +
                                        what + " NVIDIA Vulkan device(s); NVIDIA Vulkan devices: " +
                                        listing(found, gpus, false));
        }
        return hits[0];
    }

    size_t byIndex(const std::string& entry) const
    {
        // Beyond 18 digits no ordinal can exist: out of range whatever its value.
        bool huge = entry.size() > 18;
        long long index = huge ? 0 : std::strtoll(entry.c_str(), nullptr, 10);
        if (huge || index < 0 || static_cast<unsigned long long>(index) >= gpus.size()) {
            throw std::invalid_argument(std::string("ortops: ") + variable + " names GPU " +
                                        (huge ? entry : std::to_string(index)) + ", but " + std::to_string(gpus.size()) +
                                        " NVIDIA Vulkan device(s) are visible: " + listing(found, gpus, true));
        }
        return gpus[static_cast<size_t>(index)];
    }

    std::vector<size_t> pick(const std::vector<std::string>& list) const
    {
        std::vector<size_t> out;
        for (const std::string& entry : list) {
            if (lower(entry).rfind("mig-", 0) == 0) {
                throw std::invalid_argument(std::string("ortops: ") + variable + " names the MIG instance '" + entry +
                                            "': a MIG instance has no Vulkan device of its own (Vulkan sees whole "
                                            "GPUs); give whole GPUs by index or GPU-<uuid>");
            }
            bool index = allDigits(entry[0] == '-' ? entry.substr(1) : entry);
            size_t device = index ? byIndex(entry) : byUuid(entry);
            if (std::find(out.begin(), out.end(), device) == out.end()) {
                out.push_back(device);
            }
        }
        return out;
    }
};

// The NVIDIA devices NVIDIA_VISIBLE_DEVICES leaves (`gpus` in PCI order).
std::vector<size_t>
containerVisible(const std::string& text, const std::vector<VisibleDevice>& found, const std::vector<size_t>& gpus)
{
    std::string low = lower(trim(text));
    if (low == "all") {
        return gpus;
    }
    if (low.empty() || low == "none" || low == "void") {
        return {};
    }
    std::vector<std::string> list = entries(text);
    if (std::all_of(list.begin(), list.end(), allDigits) && list.size() == gpus.size()) {
        return gpus;    // inside the container: the runtime hid the other GPUs already
    }
    return Picker{ found, gpus, "NVIDIA_VISIBLE_DEVICES" }.pick(list);
}

std::optional<std::string>
environment(const char* name)
{
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
}

} // namespace

VisibilityEnv
VisibilityEnv::fromProcess()
{
    return VisibilityEnv{ environment("CUDA_VISIBLE_DEVICES"), environment("NVIDIA_VISIBLE_DEVICES"),
                          environment("CUDA_DEVICE_ORDER") };
}

CudaOrder
parseCudaOrder(const std::optional<std::string>& text)
{
    std::string v = text ? trim(*text) : std::string();
    for (char& ch : v) {
        ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
    if (v.empty() || v == "FASTEST_FIRST") {
        return CudaOrder::FastestFirst;
    }
    if (v == "PCI_BUS_ID") {
        return CudaOrder::PciBusId;
    }
    throw std::invalid_argument("ortops: CUDA_DEVICE_ORDER must be FASTEST_FIRST or PCI_BUS_ID, got '" + v + "'");
}

std::vector<size_t>
cudaOrder(const std::vector<VisibleDevice>& found, const std::optional<std::string>& orderText)
{
    std::vector<size_t> gpus;
    for (size_t i = 0; i < found.size(); ++i) {
        if (found[i].vendorId == NVIDIA_VENDOR_ID) {
            gpus.push_back(i);
        }
    }
    if (gpus.size() <= 1) {
        return gpus;
    }
    CudaOrder order = parseCudaOrder(orderText);
    std::string missing;
    std::set<uint32_t> models;
    std::set<std::string> names;
    for (size_t g : gpus) {
        if (!found[g].pciBusId) {
            missing += (missing.empty() ? "" : ", ") + found[g].label;
        }
        models.insert(found[g].deviceId);
        names.insert(found[g].name);
    }
    if (!missing.empty()) {
        throw std::invalid_argument("ortops: cannot number NVIDIA GPUs as CUDA does: no PCI bus id "
                                    "(VK_EXT_pci_bus_info) for " + missing + "; give UUIDs (GPU-...) instead");
    }
    if (order == CudaOrder::FastestFirst && models.size() > 1) {
        std::string list;
        for (const std::string& n : names) {
            list += (list.empty() ? "" : ", ") + n;
        }
        throw std::invalid_argument("ortops: CUDA's default device order (FASTEST_FIRST) for GPUs of different models (" +
                                    list + ") is CUDA's own and cannot be read from Vulkan: set "
                                    "CUDA_DEVICE_ORDER=PCI_BUS_ID or give GPU UUIDs (GPU-...) in CUDA_VISIBLE_DEVICES");
    }
    std::stable_sort(gpus.begin(), gpus.end(),
                     [&](size_t a, size_t b) { return pciKey(*found[a].pciBusId) < pciKey(*found[b].pciBusId); });
    return gpus;
}

std::optional<std::vector<size_t>>
assignedDevices(const VisibilityEnv& env, const std::vector<VisibleDevice>& found)
{
    if (!env.cudaVisible && !env.nvidiaVisible) {
        return std::nullopt;
    }
    std::vector<size_t> gpus = cudaOrder(found, env.cudaOrder);
    if (env.nvidiaVisible) {
        std::vector<size_t> kept = containerVisible(*env.nvidiaVisible, found, cudaOrder(found, std::string("PCI_BUS_ID")));
        gpus.erase(std::remove_if(gpus.begin(), gpus.end(),
                                  [&](size_t g) { return std::find(kept.begin(), kept.end(), g) == kept.end(); }),
                   gpus.end());
    }
    if (!env.cudaVisible) {
        return gpus;
    }
    return Picker{ found, gpus, "CUDA_VISIBLE_DEVICES" }.pick(entries(*env.cudaVisible));
}

VisibleDevice
visibleDevice(const DeviceDescription& d)
{
    return VisibleDevice{ deviceLabel(d), d.name, d.vendorId, d.deviceId, d.uuid, d.pciBusId };
}

std::optional<uint32_t>
assignedDeviceIndex(const VisibilityEnv& env, const std::vector<DeviceDescription>& found)
{
    std::vector<VisibleDevice> seen;
    for (const DeviceDescription& d : found) {
        seen.push_back(visibleDevice(d));
    }
    std::optional<std::vector<size_t>> chosen = assignedDevices(env, seen);
    if (!chosen || chosen->empty()) {
        return std::nullopt;
    }
    return found[chosen->front()].index;
}

} // namespace ortops
