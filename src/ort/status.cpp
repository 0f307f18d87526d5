// The error-to-status table (status.hpp).
#include "ort/status.hpp"

#include <new>
#include <string_view>

// Vulkan-Hpp's exception types (kp's headers bring vulkan.hpp), to catch vk::DeviceLostError by
// its type.
#include <vulkan/vulkan.hpp>
#include "ort/core.hpp"   // the core's headers, with the visibility they need

namespace ortops::ort {

namespace {

std::string
stripOrtopsPrefix(const char* message)
{
    std::string_view m(message);
    constexpr std::string_view p = "ortops: ";
    if (m.substr(0, p.size()) == p) {
        m.remove_prefix(p.size());
    }
    return std::string(m);
}

OrtStatus*
makeStatus(const OrtApi* api, OrtErrorCode code, const std::string& prefix, const std::string& message) noexcept
{
    try {
        std::string text = prefix + message;
        return api->CreateStatus(code, text.c_str());
    } catch (...) {
        return api->CreateStatus(code, "ortops: an error occurred and its message could not be formed (out of memory)");
    }
}

} // namespace

void
check(const OrtApi* api, OrtStatus* status, const char* what)
{
    if (status == nullptr) {
        return;
    }
    OrtErrorCode code = api->GetErrorCode(status);
    std::string message = std::string(what) + ": " + api->GetErrorMessage(status);
    api->ReleaseStatus(status);
    throw OrtCallError(code, message);
}

OrtStatus*
currentExceptionStatus(const OrtApi* api, const std::string& prefix) noexcept
{
    try {
        throw;
    } catch (const ConfigError& e) {
        return makeStatus(api, ORT_INVALID_ARGUMENT, prefix, e.what());
    } catch (const NodeError& e) {
        return makeStatus(api, ORT_INVALID_ARGUMENT, prefix, e.what());
    } catch (const InputError& e) {
        return makeStatus(api, ORT_INVALID_ARGUMENT, prefix, stripOrtopsPrefix(e.what()));
    } catch (const UnsupportedLayerError& e) {
        return makeStatus(api, ORT_NOT_IMPLEMENTED, prefix, stripOrtopsPrefix(e.what()));
    } catch (const OrtCallError& e) {
        return makeStatus(api, e.code, prefix, e.what());
    } catch (const std::bad_alloc&) {
        return makeStatus(api, ORT_FAIL, prefix, "out of host memory");
    } catch (const DeviceLostError& e) {
        return makeStatus(api, ORT_RUNTIME_EXCEPTION, prefix, "device lost: " + stripOrtopsPrefix(e.what()));
    } catch (const vk::DeviceLostError& e) {
        // An unwrapped vk::DeviceLostError (a Vulkan call outside the core's checks).
        return makeStatus(api, ORT_RUNTIME_EXCEPTION, prefix, "device lost: " + stripOrtopsPrefix(e.what()));
    } catch (const std::invalid_argument& e) {
        return makeStatus(api, ORT_INVALID_ARGUMENT, prefix, stripOrtopsPrefix(e.what()));
    } catch (const std::exception& e) {
        return makeStatus(api, ORT_FAIL, prefix, stripOrtopsPrefix(e.what()));
    } catch (...) {
        return makeStatus(api, ORT_FAIL, prefix, "unknown error (an exception not derived from std::exception)");
    }
}

} // namespace ortops::ort
