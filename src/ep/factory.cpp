// The EP factory and the library's EP entry points, CreateEpFactories / ReleaseEpFactory
// (ep.hpp). Every callback is noexcept and answers errors with an OrtStatus.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "base/text.hpp"
#include "ep/ep_impl.hpp"
#include "rnn/device_check.hpp"
#include "ort/status.hpp"

#if defined(_WIN32)
#define ORTOPS_EXPORT __declspec(dllexport)
#else
#define ORTOPS_EXPORT __attribute__((visibility("default")))
#endif

#ifndef ORTOPS_VERSION
#define ORTOPS_VERSION "0.0.0"
#endif

namespace ortops::ep {

namespace {

// The device the environment assigns first (visible.hpp), as an index; nullopt when nothing
// is assigned. Throws the rules' std::invalid_argument.
std::optional<uint32_t>
assignedIndex()
{
    return assignedDeviceIndex(VisibilityEnv::fromProcess(), devices());
}

} // namespace

bool
ortMinorAtLeast(const std::string& version, int minor)
{
    int major = 0, got = 0;
    return std::sscanf(version.c_str(), "%d.%d", &major, &got) == 2 && (major > 1 || (major == 1 && got >= minor));
}

std::vector<DeviceDescription>
usableDevices(std::string* assignment)
{
    std::vector<DeviceDescription> out;
    try {
        // The default device first: an application taking the first ortops EP device gets
        // the GPU its scheduler assigned (CUDA_VISIBLE_DEVICES), else the one the core would
        // choose (ORTOPS_DEVICE, else discrete, integrated, virtual, cpu), not lavapipe
        // beside a GPU.
        std::optional<uint32_t> preferred;
        try {
            preferred = assignedIndex();
        } catch (const std::invalid_argument& e) {    // a wrong assignment: CreateEp refuses it
            if (assignment) {
                *assignment = e.what();
            }
        }
        if (!preferred) {
            try {
                preferred = chooseDevice(std::nullopt).index;
            } catch (const std::invalid_argument&) {    // a wrong ORTOPS_DEVICE: enumeration order
            }
        }
        for (const DeviceDescription& d : devices()) {
            if (!deviceRefusal(d)) {
                out.push_back(d);
            }
        }
        std::stable_partition(out.begin(), out.end(),
                              [&](const DeviceDescription& d) { return preferred && d.index == *preferred; });
    } catch (const std::exception&) {
        // No Vulkan loader or no device: the factory offers nothing.
    }
    return out;
}

const DeviceDescription&
defaultDevice()
{
    if (std::optional<uint32_t> assigned = assignedIndex()) {
        return chooseDevice(std::to_string(*assigned));
    }
    return chooseDevice(std::nullopt);
}

namespace {

Factory*
self(const OrtEpFactory* f)
{
    return static_cast<Factory*>(const_cast<OrtEpFactory*>(f));
}

const char* ORT_API_CALL
getName(const OrtEpFactory*) noexcept
{
    return EP_NAME;
}

const char* ORT_API_CALL
getVendor(const OrtEpFactory*) noexcept
{
    return EP_VENDOR;
}

uint32_t ORT_API_CALL
getVendorId(const OrtEpFactory*) noexcept
{
    return 0;
}

const char* ORT_API_CALL
getVersion(const OrtEpFactory*) noexcept
{
    return ORTOPS_VERSION;
}

// A warning through the logger ORT gave the factory.
void
warn(const Factory& f, const std::string& message) noexcept
{
    if (f.logger == nullptr) {
        return;
    }
    if (OrtStatus* s = f.api->Logger_LogMessage(f.logger, ORT_LOGGING_LEVEL_WARNING, message.c_str(), ORT_FILE,
                                                __LINE__, "ortops::ep::GetSupportedDevices")) {
        f.api->ReleaseStatus(s);
    }
}

// A GPU hardware device the factory creates for a Vulkan GPU that ORT did not discover (once
// per device; the factory releases it), with the metadata ORT's own discovery gives a GPU:
// "Discrete" (provider_policy_context.cc prefers a discrete GPU) and "pci_bus_id". nullptr,
// with a warning, where ORT refuses.
const OrtHardwareDevice*
createdGpu(Factory& f, const DeviceDescription& d)
{
    for (const auto& [uuid, device] : f.ownHardwareDevices) {
        if (uuid == d.uuid) {
            return device;
        }
    }
    const OrtApi* api = f.api;
    OrtKeyValuePairs* meta = nullptr;
    api->CreateKeyValuePairs(&meta);
    if (d.type == "discrete" || d.type == "integrated") {
        api->AddKeyValuePair(meta, "Discrete", d.type == "discrete" ? "1" : "0");
    }
    if (d.pciBusId) {
        api->AddKeyValuePair(meta, META_PCI_BUS_ID, d.pciBusId->c_str());
    }
    OrtHardwareDevice* device = nullptr;
    OrtStatus* s = f.epApi->CreateHardwareDevice(OrtHardwareDeviceType_GPU, d.vendorId, d.deviceId, "", meta, &device);
    api->ReleaseKeyValuePairs(meta);
    if (s != nullptr) {
        warn(f, "ortops: CreateHardwareDevice for " + d.name + " failed (" + api->GetErrorMessage(s) +
                  "): its EP device is on the CPU hardware device");
        api->ReleaseStatus(s);
        return nullptr;
    }
    f.ownHardwareDevices.emplace_back(d.uuid, device);
    return device;
}

// The hardware device a Vulkan device is offered on, which is what ONNX Runtime's automatic
// device selection sees of it (its policies pick EP devices by hardware device type): a CPU
// implementation of Vulkan (lavapipe) on ORT's CPU device; a GPU on the GPU device ORT
// discovered with its PCI vendor and device ids (and PCI bus id, where two GPUs share the
// ids), else on one the factory creates (ORT's Linux discovery reads /sys/class/drm, which
// containers often lack: the H200 machine), else, in an onnxruntime before 1.24 that cannot
// create one, on the CPU device.
const OrtHardwareDevice*
hardwareFor(Factory& f, const DeviceDescription& d, const OrtHardwareDevice* const* hw, size_t n)
{
    const OrtApi* api = f.api;
    const OrtHardwareDevice* cpu = nullptr;
    const OrtHardwareDevice* gpu = nullptr;
    for (size_t i = 0; i < n; ++i) {
        OrtHardwareDeviceType type = api->HardwareDevice_Type(hw[i]);
        if (type == OrtHardwareDeviceType_CPU && cpu == nullptr) {
            cpu = hw[i];
        }
        if (type != OrtHardwareDeviceType_GPU || api->HardwareDevice_VendorId(hw[i]) != d.vendorId ||
            api->HardwareDevice_DeviceId(hw[i]) != d.deviceId) {
            continue;
        }
        const char* bus = api->GetKeyValue(api->HardwareDevice_Metadata(hw[i]), META_PCI_BUS_ID);
        if (gpu == nullptr || (bus != nullptr && d.pciBusId && text::lower(bus) == text::lower(*d.pciBusId))) {
            gpu = hw[i];
        }
    }
    if (d.type == "cpu") {
        return cpu;
    }
    if (gpu != nullptr) {
        return gpu;
    }
    const OrtHardwareDevice* created = f.createsHardwareDevices ? createdGpu(f, d) : nullptr;
    return created != nullptr ? created : cpu;
}

OrtStatus* ORT_API_CALL
getSupportedDevices(OrtEpFactory* factory, const OrtHardwareDevice* const* hw, size_t numHw, OrtEpDevice** out,
                    size_t maxOut, size_t* numOut) noexcept
{
    Factory* f = self(factory);
    const OrtApi* api = f->api;
    *numOut = 0;
    return ort::guarded(api, "ortops: GetSupportedDevices: ", [&] {
        std::string assignment;
        std::vector<DeviceDescription> usable = usableDevices(&assignment);
        if (!assignment.empty()) {
            warn(*f, assignment + " (a session without the EP option 'device' will be refused)");
        }
        for (const DeviceDescription& d : usable) {
            const OrtHardwareDevice* device = hardwareFor(*f, d, hw, numHw);
            if (device == nullptr || *numOut >= maxOut) {
                continue;
            }
            OrtKeyValuePairs* meta = nullptr;
            api->CreateKeyValuePairs(&meta);
            api->AddKeyValuePair(meta, META_UUID, d.uuid.c_str());
            api->AddKeyValuePair(meta, META_NAME, d.name.c_str());
            api->AddKeyValuePair(meta, META_DRIVER, (d.driver + " " + d.driverInfo).c_str());
            api->AddKeyValuePair(meta, META_INDEX, std::to_string(d.index).c_str());
            if (d.pciBusId) {
                api->AddKeyValuePair(meta, META_PCI_BUS_ID, d.pciBusId->c_str());
            }
            OrtEpDevice* epDevice = nullptr;
            OrtStatus* s = f->epApi->CreateEpDevice(factory, device, meta, nullptr, &epDevice);
            api->ReleaseKeyValuePairs(meta);
            ort::check(api, s, "CreateEpDevice");
            out[(*numOut)++] = epDevice;    // ORT owns it from here
        }
    });
}

// "'a', 'b', 'c'": the names of one of the core's vocabularies (types.hpp), for messages.
template<typename T, size_t N>
std::string
quotedNames(const T (&values)[N], const char* (*name)(T))
{
    std::string out;
    for (T v : values) {
        out += (out.empty() ? "'" : ", '") + std::string(name(v)) + "'";
    }
    return out;
}

// The vocabulary's value named `text`; std::invalid_argument saying what was expected and what came.
template<typename T, size_t N>
T
named(const T (&values)[N], const char* (*name)(T), const std::string& text)
{
    for (T v : values) {
        if (text == name(v)) {
            return v;
        }
    }
    throw std::invalid_argument("must be one of " + quotedNames(values, name) + ", got '" + text + "'");
}

// The `device` option, checked against the devices now (the core's chooseDevice).
std::string
deviceOption(const std::string& value)
{
    try {
        (void)chooseDevice(value);
    } catch (const std::invalid_argument& e) {
        std::string why = e.what();
        throw std::invalid_argument("names no Vulkan device: " + (why.rfind("ortops: ", 0) == 0 ? why.substr(8) : why));
    }
    return value;
}

// The EP's options, one line a key (ep.hpp's EpOptions says what each means): `read` checks
// the value and sets it, or throws std::invalid_argument saying what was expected.
struct OptionKey
{
    const char* key;
    void (*read)(EpOptions& options, const std::string& value);
};

const OptionKey EP_OPTIONS[] = {
    { "device", [](EpOptions& o, const std::string& v) { o.device = deviceOption(v); } },
    { "mode", [](EpOptions& o, const std::string& v) { o.mode = modeName(named(MODES, modeName, v)); } },
    { "placement", [](EpOptions& o, const std::string& v) { o.placement = named(PLACEMENTS, placementName, v); o.placementGiven = true; } },
    { "report_id", [](EpOptions& o, const std::string& v) { o.reportId = v; } },    // decisions.hpp
};

std::string
knownOptions()
{
    std::string out;
    for (const OptionKey& k : EP_OPTIONS) {
        out += (out.empty() ? "'" : ", '") + std::string(k.key) + "'";
    }
    return out;
}

// The EP options of the session: every config entry "ep.ortopsexecutionprovider.<key>" (how
// ONNX Runtime passes provider options to a plugin EP), each key one of EP_OPTIONS. Throws
// std::invalid_argument "option '<key>' ..." or "unknown option '<key>' ..." (CreateEp puts
// the EP's name before it).
EpOptions
readOptions(const OrtApi* api, const OrtSessionOptions* options)
{
    OrtKeyValuePairs* entries = nullptr;
    ort::check(api, api->GetSessionOptionsConfigEntries(options, &entries), "GetSessionOptionsConfigEntries");
    std::unique_ptr<OrtKeyValuePairs, void (*)(OrtKeyValuePairs*)> hold(entries, api->ReleaseKeyValuePairs);
    const char* const* keys = nullptr;
    const char* const* values = nullptr;
    size_t count = 0;
    api->GetKeyValuePairs(entries, &keys, &values, &count);
    const size_t prefix = std::strlen(EP_OPTION_PREFIX);
    EpOptions o;
    for (size_t i = 0; i < count; ++i) {
        if (std::strncmp(keys[i], EP_OPTION_PREFIX, prefix) != 0) {
            continue;
        }
        std::string key = keys[i] + prefix;
        auto known = std::find_if(std::begin(EP_OPTIONS), std::end(EP_OPTIONS),
                                  [&](const OptionKey& k) { return key == k.key; });
        if (known == std::end(EP_OPTIONS)) {
            throw std::invalid_argument("unknown option '" + key + "' (its options: " + knownOptions() + ")");
        }
        try {
            known->read(o, values[i] ? values[i] : "");
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("option '" + key + "' " + e.what());
        }
    }
    return o;
}

// The device of a session without the `device` option: the OrtEpDevice it was given (the
// factory lists the assigned one first), else the default. A wrong CUDA_VISIBLE_DEVICES /
// NVIDIA_VISIBLE_DEVICES is refused here with the rules' error rather than ignored: the
// scheduler meant another device (the `device` option chooses one explicitly).
const DeviceDescription&
sessionDevice(const OrtApi* api, const OrtKeyValuePairs* const* metadata, size_t numDevices)
{
    (void)assignedIndex();
    if (numDevices > 0 && metadata != nullptr && metadata[0] != nullptr) {
        if (const char* uuid = api->GetKeyValue(metadata[0], META_UUID)) {
            return chooseDevice(std::string(uuid));
        }
    }
    return defaultDevice();
}

OrtStatus* ORT_API_CALL
createEp(OrtEpFactory* factory, const OrtHardwareDevice* const*, const OrtKeyValuePairs* const* metadata,
         size_t numDevices, const OrtSessionOptions* sessionOptions, const OrtLogger* logger, OrtEp** ep) noexcept
{
    Factory* f = self(factory);
    const OrtApi* api = f->api;
    *ep = nullptr;
    EpOptions options;
    if (OrtStatus* bad = ort::guarded(api, std::string(EP_NAME) + ": ", [&] { options = readOptions(api, sessionOptions); })) {
        return bad;
    }
    return ort::guarded(api, "ortops: CreateEp: ", [&] {
        const DeviceDescription& device = options.device ? chooseDevice(options.device)
                                                         : sessionDevice(api, metadata, numDevices);
        if (!options.placementGiven) {
            options.placement = defaultPlacement(device.type);
        }
        requireDevice(device);
        *ep = new Ep(f, logger, options, device);
    });
}

void ORT_API_CALL
releaseEp(OrtEpFactory*, OrtEp* ep) noexcept
{
    delete static_cast<Ep*>(ep);
}

OrtStatus* ORT_API_CALL
createDataTransfer(OrtEpFactory*, OrtDataTransferImpl** transfer) noexcept
{
    *transfer = nullptr;    // inputs and outputs stay in ORT's CPU memory
    return nullptr;
}

} // namespace

Factory::Factory(const OrtApi* api_, const OrtLogger* logger_, std::string registered, std::string ortVersion_)
  : OrtEpFactory{}, api(api_), epApi(api_->GetEpApi()), logger(logger_), registeredName(std::move(registered)),
    ortVersion(std::move(ortVersion_))
{
    ort_version_supported = EP_API_VERSION;
    GetName = getName;
    GetVendor = getVendor;
    GetVendorId = getVendorId;
    GetVersion = getVersion;
    GetSupportedDevices = getSupportedDevices;
    CreateEp = createEp;
    ReleaseEp = releaseEp;
    CreateDataTransfer = createDataTransfer;
}

Factory::~Factory()
{
    for (const auto& owned : ownHardwareDevices) {
        epApi->ReleaseHardwareDevice(owned.second);
    }
}

} // namespace ortops::ep

extern "C" ORTOPS_EXPORT OrtStatus* ORT_API_CALL
CreateEpFactories(const char* registeredName, const OrtApiBase* base, const OrtLogger* logger,
                  OrtEpFactory** factories, size_t maxFactories, size_t* numFactories) noexcept
{
    using namespace ortops::ep;
    if (base == nullptr || numFactories == nullptr) {
        return nullptr;
    }
    *numFactories = 0;
    const OrtApi* api = base->GetApi(EP_API_VERSION);
    if (api == nullptr) {
        const OrtApi* oldest = base->GetApi(1);
        if (oldest == nullptr) {
            return nullptr;
        }
        std::string m = "ortops: the execution provider needs onnxruntime 1.23 or later (ORT API " +
                        std::to_string(EP_API_VERSION) + "); this is onnxruntime " +
                        (base->GetVersionString ? base->GetVersionString() : "of unknown version");
        return oldest->CreateStatus(ORT_NOT_IMPLEMENTED, m.c_str());
    }
    if (maxFactories < 1) {
        return api->CreateStatus(ORT_INVALID_ARGUMENT, "ortops: CreateEpFactories: no room for a factory");
    }
    return ortops::ort::guarded(api, "ortops: CreateEpFactories: ", [&] {
        std::string version = (base->GetVersionString && base->GetVersionString()) ? base->GetVersionString() : "unknown";
        auto* factory = new Factory(api, logger, registeredName ? registeredName : "", version);
        factory->createsHardwareDevices = ortMinorAtLeast(version, HARDWARE_DEVICE_ORT_MINOR);
        factories[0] = factory;
        *numFactories = 1;
    });
}

extern "C" ORTOPS_EXPORT OrtStatus* ORT_API_CALL
ReleaseEpFactory(OrtEpFactory* factory) noexcept
{
    delete static_cast<ortops::ep::Factory*>(factory);
    return nullptr;
}
