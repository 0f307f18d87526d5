// The scheduler's GPUs (src/core/vk/visible.hpp): CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES
// mapped onto made-up device lists (no GPU needed), the same table tests/test_visible.py runs
// through the Python door's ortops.visible.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "vk/devices.hpp"
#include "vk/visible.hpp"

using namespace ortops;

namespace {

const std::string UA = "8c1b2f3e-1111-2222-3333-444455556666";
const std::string UB = "8c1b9a00-aaaa-bbbb-cccc-ddddeeeeffff";
const std::string UC = "0f0e0d0c-0000-1111-2222-333344445555";

VisibleDevice
gpu(const std::string& label, const std::string& uuid, const std::string& pci, uint32_t deviceId = 0x2335,
    const std::string& name = "NVIDIA H200")
{
    return VisibleDevice{ label, name, NVIDIA_VENDOR_ID, deviceId, uuid, pci };
}

// Enumerated in an order that is not the PCI order, with a CPU device CUDA never sees:
// PCI order A (0000:18), B (0000:9a), C (0001:05).
std::vector<VisibleDevice>
found()
{
    return { gpu("B", UB, "0000:9a:00.0"),
             VisibleDevice{ "lava", "llvmpipe", 0x10005, 0, "6d657361-3232-2e33-2e36-000000000000", std::nullopt },
             gpu("A", UA, "0000:18:00.0"), gpu("C", UC, "0001:05:00.0") };
}

std::string
labels(const std::vector<VisibleDevice>& devices, const std::vector<size_t>& positions)
{
    std::string out;
    for (size_t p : positions) {
        out += devices[p].label;
    }
    return out;
}

// The labels assigned, "-" for no assignment at all.
std::string
assigned(const VisibilityEnv& env, const std::vector<VisibleDevice>& devices = found())
{
    auto got = assignedDevices(env, devices);
    return got ? labels(devices, *got) : "-";
}

std::string
refusal(const VisibilityEnv& env, const std::vector<VisibleDevice>& devices = found())
{
    try {
        assignedDevices(env, devices);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

VisibilityEnv
cuda(const std::string& value)
{
    return VisibilityEnv{ value, std::nullopt, std::nullopt };
}

VisibilityEnv
container(const std::string& value)
{
    return VisibilityEnv{ std::nullopt, value, std::nullopt };
}

} // namespace

TEST_SUITE("visible")
{
    TEST_CASE("CUDA order is PCI order for GPUs of one model; lavapipe is never a CUDA device")
    {
        CHECK(labels(found(), cudaOrder(found(), std::nullopt)) == "ABC");
        CHECK(labels(found(), cudaOrder(found(), std::string(" pci_bus_id "))) == "ABC");
        CHECK_THROWS_WITH(cudaOrder(found(), std::string("SLOWEST_FIRST")),
                          "ortops: CUDA_DEVICE_ORDER must be FASTEST_FIRST or PCI_BUS_ID, got 'SLOWEST_FIRST'");
    }

    TEST_CASE("FASTEST_FIRST across models is CUDA's own: refused, PCI_BUS_ID accepted")
    {
        std::vector<VisibleDevice> mixed = { gpu("B", UB, "0000:9a:00.0"), gpu("L", UA, "0000:18:00.0", 0x27b8, "NVIDIA L4") };
        CHECK_THROWS_WITH(cudaOrder(mixed, std::nullopt),
                          doctest::Contains("(NVIDIA H200, NVIDIA L4) is CUDA's own and cannot be read from Vulkan: "
                                            "set CUDA_DEVICE_ORDER=PCI_BUS_ID"));
        CHECK(labels(mixed, cudaOrder(mixed, std::string("PCI_BUS_ID"))) == "LB");
    }

    TEST_CASE("the variables map to the devices they name, in the order listed")
    {
        const std::map<std::string, std::pair<VisibilityEnv, std::string>> table = {
            { "neither", { VisibilityEnv{}, "-" } },
            { "empty", { cuda(""), "" } },
            { "0", { cuda("0"), "A" } },
            { "1", { cuda("1"), "B" } },
            { "2,0", { cuda("2,0"), "CA" } },
            { "duplicates", { cuda(" 1 , 1 "), "B" } },
            { "uuid", { cuda("GPU-" + UB), "B" } },
            { "unique prefix", { cuda("GPU-8c1b9"), "B" } },
            { "upper case, no GPU-", { cuda("0F0E0D0C-0000-1111-2222-333344445555"), "C" } },
            { "uuid and index", { cuda("GPU-" + UC + ",0"), "CA" } },
            { "container all", { container("all"), "ABC" } },
            { "container none", { container("none"), "" } },
            { "container void", { container("void"), "" } },
            { "container host index", { container("2"), "C" } },
            { "inside the container", { container("0,1,2"), "ABC" } },
            { "container then CUDA", { VisibilityEnv{ "1", "GPU-" + UB + ",GPU-" + UC, std::nullopt }, "C" } },
            { "PCI_BUS_ID", { VisibilityEnv{ "0", std::nullopt, "PCI_BUS_ID" }, "A" } },
        };
        for (const auto& [name, row] : table) {
            CAPTURE(name);
            CHECK(assigned(row.first) == row.second);
        }
    }

    TEST_CASE("a bad assignment is a clear error naming the variable and the devices")
    {
        CHECK(refusal(cuda("MIG-5f2a1c3e-aaaa-bbbb-cccc-dddddddddddd")) ==
              "ortops: CUDA_VISIBLE_DEVICES names the MIG instance 'MIG-5f2a1c3e-aaaa-bbbb-cccc-dddddddddddd': a MIG "
              "instance has no Vulkan device of its own (Vulkan sees whole GPUs); give whole GPUs by index or GPU-<uuid>");
        CHECK(refusal(cuda("3")) == "ortops: CUDA_VISIBLE_DEVICES names GPU 3, but 3 NVIDIA Vulkan device(s) are visible: "
                                    "0: A GPU-" + UA + "; 1: B GPU-" + UB + "; 2: C GPU-" + UC);
        CHECK(refusal(cuda("-1")).find("names GPU -1, but 3") != std::string::npos);
        CHECK(refusal(cuda("GPU-8c1b")).find("names 'GPU-8c1b', which matches 2 NVIDIA Vulkan device(s)") != std::string::npos);
        CHECK(refusal(cuda("GPU-ffff")).find("which matches no NVIDIA Vulkan device(s)") != std::string::npos);
        CHECK(refusal(cuda("GPU-6d657361")).find("matches no NVIDIA Vulkan") != std::string::npos);   // lavapipe
        CHECK(refusal(container("GPU-ffff")).find("ortops: NVIDIA_VISIBLE_DEVICES names 'GPU-ffff'") == 0);
    }

    TEST_CASE("no NVIDIA device: an index is an error, an empty list assigns nothing")
    {
        std::vector<VisibleDevice> cpuOnly = { found()[1] };
        CHECK(refusal(cuda("0"), cpuOnly) ==
              "ortops: CUDA_VISIBLE_DEVICES names GPU 0, but 0 NVIDIA Vulkan device(s) are visible: none");
        CHECK(assigned(cuda(""), cpuOnly).empty());
        CHECK(assigned(VisibilityEnv{}, cpuOnly) == "-");
    }

    TEST_CASE("several GPUs without a PCI bus id cannot be numbered: UUIDs asked for; one GPU needs no order")
    {
        std::vector<VisibleDevice> noPci = { found()[2], found()[0] };
        noPci[0].pciBusId.reset();
        noPci[1].pciBusId.reset();
        CHECK(refusal(cuda("0")) == "");
        CHECK(refusal(cuda("0"), noPci) == "ortops: cannot number NVIDIA GPUs as CUDA does: no PCI bus id "
                                           "(VK_EXT_pci_bus_info) for A, B; give UUIDs (GPU-...) instead");
        std::vector<VisibleDevice> one = { noPci[0] };
        CHECK(assigned(cuda("GPU-" + UA), one) == "A");
    }

    TEST_CASE("a described device is labelled as the Python door's str(Device)")
    {
        DeviceDescription d;
        d.index = 2;
        d.name = "NVIDIA H200";
        d.type = "discrete";
        d.driver = "NVIDIA";
        d.driverInfo = "580";
        d.apiVersion = "1.4.312";
        d.vendorId = NVIDIA_VENDOR_ID;
        d.uuid = UA;
        d.pciBusId = "0000:18:00.0";
        CHECK(visibleDevice(d).label == "[2] NVIDIA H200 (discrete, NVIDIA 580, Vulkan 1.4.312)");
        std::vector<DeviceDescription> all = { d };
        CHECK(assignedDeviceIndex(cuda("0"), all) == 2u);
        CHECK_FALSE(assignedDeviceIndex(cuda(""), all).has_value());
        CHECK_FALSE(assignedDeviceIndex(VisibilityEnv{}, all).has_value());
    }
}
