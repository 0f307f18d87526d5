// The EP factory and the library's EP entry points, CreateEpFactories / ReleaseEpFactory
// (ep.hpp). Every callback is noexcept and answers errors with an OrtStatus.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "ep/ep_impl.hpp"
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
            if (d.nanPreserveFloat32) {
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

// The hardware device a Vulkan device is offered on: the GPU ORT discovered with its vendor
// and device ids, else the CPU device (ORT discovers no GPU without /sys/class/drm, and
// lavapipe is no PCI device).
const OrtHardwareDevice*
hardwareFor(const OrtApi* api, const DeviceDescription& d, const OrtHardwareDevice* const* hw, size_t n)
{
    const OrtHardwareDevice* cpu = nullptr;
    for (size_t i = 0; i < n; ++i) {
        OrtHardwareDeviceType type = api->HardwareDevice_Type(hw[i]);
        if (type == OrtHardwareDeviceType_GPU && api->HardwareDevice_VendorId(hw[i]) == d.vendorId &&
            api->HardwareDevice_DeviceId(hw[i]) == d.deviceId) {
            return hw[i];
        }
        if (type == OrtHardwareDeviceType_CPU && cpu == nullptr) {
            cpu = hw[i];
        }
    }
    return cpu;
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
            const OrtHardwareDevice* device = hardwareFor(api, d, hw, numHw);
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

// An EP option from the session's config ("ep.ortopsexecutionprovider.<key>"), if set.
std::optional<std::string>
option(const OrtApi* api, const OrtSessionOptions* options, const char* key)
{
    std::string name = std::string(EP_OPTION_PREFIX) + key;
    int has = 0;
    ort::check(api, api->HasSessionConfigEntry(options, name.c_str(), &has), "HasSessionConfigEntry");
    if (!has) {
        return std::nullopt;
    }
    return ort::twoCallString(
      api, [&](char* buf, size_t* size) { return api->GetSessionConfigEntry(options, name.c_str(), buf, size); },
      "GetSessionConfigEntry");
}

EpOptions
readOptions(const OrtApi* api, const OrtSessionOptions* options)
{
    EpOptions o;
    o.device = option(api, options, "device");
    if (auto mode = option(api, options, "mode")) {
        if (*mode != "deterministic" && *mode != "exact" && *mode != "fast") {
            throw std::invalid_argument("EP option mode must be 'deterministic', 'exact' or 'fast', got '" + *mode + "'");
        }
        o.mode = *mode;
    }
    if (auto placement = option(api, options, "placement")) {
        o.placement = parsePlacement(*placement, "EP option placement");
    }
    o.reportId = option(api, options, "report_id").value_or("");    // decisions.hpp: the session's report
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
    return ort::guarded(api, "ortops: CreateEp: ", [&] {
        EpOptions options = readOptions(api, sessionOptions);
        const DeviceDescription& device = options.device ? chooseDevice(options.device)
                                                         : sessionDevice(api, metadata, numDevices);
        if (!device.nanPreserveFloat32) {
            throw UnsupportedLayerError("the Vulkan device " + device.name + " does not preserve NaN, Inf and -0 "
                                        "in float32 shaders (shaderSignedZeroInfNanPreserveFloat32)");
        }
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
        factories[0] = new Factory(api, logger, registeredName ? registeredName : "", version);
        *numFactories = 1;
    });
}

extern "C" ORTOPS_EXPORT OrtStatus* ORT_API_CALL
ReleaseEpFactory(OrtEpFactory* factory) noexcept
{
    delete static_cast<ortops::ep::Factory*>(factory);
    return nullptr;
}
