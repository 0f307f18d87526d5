// The Vulkan instance, device and queues a process runs on, and what can go wrong with them.
//
// ortops creates the instance and device itself rather than through kp::Manager, so that the
// Khronos validation layer with synchronization validation can be switched on per process and
// its messages collected here (take_messages) for the tests to fail on. A Context also owns the
// device's compute queues with the locks Vulkan requires around their use, the device-loss
// state every submission checks, and the limits read once at creation (dispatch checks read
// them from here rather than asking the driver again). The devices are described in
// devices.hpp, the instance made in instance.hpp.
#pragma once

#include <kompute/Kompute.hpp>

#include "vk/cooperative_matrix.hpp"
#include "base/errors.hpp"
#include "vk/pipelines.hpp"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ortops {

// One VkQueue and the lock that makes its use externally synchronised, as Vulkan requires
// (vkQueueSubmit from two threads on one queue is undefined; on the H200 it lost the device).
struct Queue
{
    vk::Queue queue;
    std::mutex lock;
};

// Sequences are spread round robin over the context's queues (as many as the Python side asks
// for, ortops.device.max_queues, and the family offers: NVIDIA 16, lavapipe 1). On one queue
// every pipeline barrier of a run also waits for the work submitted before it, so concurrent
// runs execute one after another on the GPU; several queues let them overlap where the
// hardware runs queues at once. On the H200 they did not pay (ortops.device.DEFAULT_QUEUES).
//
// Owns the instance and device. Every object made on it (Buffer, HostBuffer, Program,
// Sequence) holds a shared_ptr to it, so the VkDevice outlives the buffers, pipelines and
// command pools made on it.
struct Context
{
    vk::Instance instance;
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
    std::shared_ptr<vk::PhysicalDevice> physical;
    std::shared_ptr<vk::Device> device;
    std::vector<std::unique_ptr<Queue>> queues;
    std::atomic<uint32_t> nextQueue{ 0 };
    std::atomic<bool> lost{ false };
    std::string lostReason;
    std::mutex lostLock;
    uint32_t family = 0;
    float timestampPeriod = 1.0f;
    vk::PhysicalDeviceLimits limits;
    // Whether a run's end is found by polling a host-visible word before the fence wait
    // (Sequence::wait). Not on a CPU implementation: there the spinning thread takes a core
    // from the threads that execute the shaders (lavapipe on 2 cores).
    bool pollCompletion = true;
    // Whether the device was created with VK_KHR_cooperative_matrix and the features its
    // kernels need (cooperative_matrix.hpp): mode "fast" may use them only then.
    bool cooperativeMatrix = false;
    std::string cooperativeMatrixOff;   // why not, where the device offers it
    // Whether the device was created with the Vulkan memory model at device scope
    // (grid_support.hpp): the persistent step kernel's grid barrier needs it.
    bool memoryModelDeviceScope = false;
    // And with 64-bit atomics on storage buffers (grid_support.hpp): the persistent kernel's
    // module declares them.
    bool int64Atomics = false;
    // The compute pipelines of the device's programs, one per shader and specialization
    // (pipelines.hpp); emptied before the device is destroyed.
    PipelineTable pipelines;

    Context(uint32_t index, bool validation, uint32_t maxQueues);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    // The queue a new sequence submits to.
    Queue& pickQueue();

    // Record that the device is unusable and raise DeviceLostError for the caller's run.
    [[noreturn]] void fail(const std::string& what);
    // Raise DeviceLostError if the device was lost earlier.
    void checkAlive();
    // Test hook: mark the context lost, as a VK_ERROR_DEVICE_LOST would, without raising.
    void simulateLoss();

  private:
    void markLost(const std::string& what);
    void destroyInstance();
};

// Validation messages (warnings and errors) since the last call, and clear them.
std::vector<std::string>
takeMessages();

} // namespace ortops
