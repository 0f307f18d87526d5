// The choice of a device (src/core/vk/devices.hpp, chooseAmong) and the device check
// (src/core/rnn/device_check.hpp) on made-up devices (no GPU needed): the rules every door
// uses, the Python door's through _vk.choose_device / _vk.require_device (tests/test_visible.py,
// tests/test_devices.py).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rnn/device_check.hpp"
#include "vk/devices.hpp"

using namespace ortops;

namespace {

DeviceDescription
device(uint32_t index, const std::string& name, const std::string& type, const std::string& uuid,
       uint32_t vendor = NVIDIA_VENDOR_ID, const std::string& pci = "")
{
    DeviceDescription d;
    d.index = index;
    d.name = name;
    d.type = type;
    d.uuid = uuid;
    d.vendorId = vendor;
    d.deviceId = 0x2335;
    d.driver = "driver";
    d.driverInfo = "1.0";
    d.apiVersion = "1.3.0";
    d.nanPreserveFloat32 = true;
    if (!pci.empty()) {
        d.pciBusId = pci;
    }
    return d;
}

// Two GPUs enumerated out of PCI order (b before a) and lavapipe.
std::vector<DeviceDescription>
machine()
{
    return { device(0, "NVIDIA H200", "discrete", "8c1b9a00-aaaa-bbbb-cccc-ddddeeeeffff", NVIDIA_VENDOR_ID, "0000:9a:00.0"),
             device(1, "NVIDIA H200", "discrete", "8c1b2f3e-1111-2222-3333-444455556666", NVIDIA_VENDOR_ID, "0000:18:00.0"),
             device(2, "llvmpipe (LLVM 15.0.6, 256 bits)", "cpu", "6d657361-3232-2e33-2e36-000000000000", 0x10005) };
}

size_t
choose(const std::optional<std::string>& spec, const std::optional<std::string>& env = std::nullopt,
       VisibilityEnv visibility = {}, const std::vector<DeviceDescription>& found = machine())
{
    return chooseAmong(found, DeviceRequest{ spec, env, visibility });
}

std::string
refusal(const std::optional<std::string>& spec, const std::optional<std::string>& env = std::nullopt,
        const std::vector<DeviceDescription>& found = machine())
{
    try {
        choose(spec, env, {}, found);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "(chosen)";
}

} // namespace

TEST_CASE("a device is chosen by index, UUID, type or name, else ORTOPS_DEVICE, the scheduler's, the preferred")
{
    CHECK(choose("2") == 2);
    CHECK(choose(" 1 ") == 1);
    CHECK(choose("GPU-8c1b2f3e") == 1);
    CHECK(choose("8C1B9A00AAAA") == 0);
    CHECK(choose("cpu") == 2);
    CHECK(choose("LLVMPIPE") == 2);
    CHECK(choose("h200") == 0);
    CHECK(choose(std::nullopt) == 0);                         // the first discrete GPU
    CHECK(choose("", "cpu") == 2);                            // a blank spec is none
    CHECK(choose("1", "cpu") == 1);                           // the spec wins over ORTOPS_DEVICE
    VisibilityEnv cuda{ std::string("0"), std::nullopt, std::nullopt };
    CHECK(choose(std::nullopt, std::nullopt, cuda) == 1);     // CUDA's GPU 0 in PCI order
    CHECK(choose(std::nullopt, "cpu", cuda) == 2);            // ORTOPS_DEVICE wins over it
    std::vector<DeviceDescription> lavapipe = { machine()[2] };
    VisibilityEnv wrong{ std::string("3"), std::nullopt, std::nullopt };
    CHECK(choose(std::nullopt, std::nullopt, wrong, lavapipe) == 0);   // no NVIDIA device: not read
    CHECK_THROWS_AS(choose(std::nullopt, std::nullopt, wrong), std::invalid_argument);
}

TEST_CASE("a selection that matches nothing names what was asked and lists the devices")
{
    const std::string listing = "devices: [0] NVIDIA H200 (discrete) uuid 8c1b9a00-aaaa-bbbb-cccc-ddddeeeeffff; "
                                "[1] NVIDIA H200 (discrete) uuid 8c1b2f3e-1111-2222-3333-444455556666; "
                                "[2] llvmpipe (LLVM 15.0.6, 256 bits) (cpu) uuid 6d657361-3232-2e33-2e36-000000000000";
    CHECK(refusal("nvidia-l4") == "ortops: no Vulkan device matches 'nvidia-l4' (an index, a type such as 'discrete' or "
                                  "'cpu', a UUID or its prefix, or part of a name); " + listing);
    CHECK(refusal("7") == "ortops: no Vulkan device with index 7; " + listing);
    CHECK(refusal(std::nullopt, "7") == "ortops: no Vulkan device with index 7 (from ORTOPS_DEVICE); " + listing);
    CHECK(refusal("GPU-8c1b") == "ortops: the UUID prefix 'GPU-8c1b' matches 2 Vulkan devices (give more digits); " +
                                   listing);
    CHECK(refusal("deadbeef") == "ortops: no Vulkan device has a UUID starting with 'deadbeef'; " + listing);
    CHECK(refusal("99999999999999999999") == "ortops: no Vulkan device with index 99999999999999999999; " + listing);
    std::string none = refusal("nvidia", std::nullopt, {});
    CHECK(none.find("no Vulkan device matches 'nvidia'") != std::string::npos);
    CHECK(none.find("devices: none (no Vulkan device with a compute queue was found") != std::string::npos);
    CHECK_THROWS_AS(choose(std::nullopt, std::nullopt, {}, {}), NoDeviceError);
}

TEST_CASE("the device check names the device and the missing float control, in exact mode too")
{
    DeviceDescription d = machine()[0];
    CHECK_FALSE(deviceRefusal(d).has_value());
    CHECK_NOTHROW(requireDevice(d, Mode::Exact));
    d.nanPreserveFloat32 = false;
    std::string plain = deviceRefusal(d).value_or("");
    CHECK(plain.find("the Vulkan device [0] NVIDIA H200 (discrete, driver 1.0, Vulkan 1.3.0) cannot run") !=
          std::string::npos);
    CHECK(plain.find("shaderSignedZeroInfNanPreserveFloat32") != std::string::npos);
    std::string exact = deviceRefusal(d, Mode::Exact).value_or("");
    CHECK(exact.find("mode='exact' cannot give device-independent results on the Vulkan device [0] NVIDIA H200") !=
          std::string::npos);
    CHECK_THROWS_AS(requireDevice(d, Mode::Fast), UnsupportedDeviceError);
    CHECK_THROWS_AS(requireDevice(d), UnsupportedLayerError);   // the doors catch it as before
}
