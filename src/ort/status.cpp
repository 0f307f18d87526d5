// The status mapping (status.hpp).
#include "ort/status.hpp"

#include <cstring>
#include <exception>
#include <new>
#include <string_view>
#include <typeinfo>

#include "ort/core.hpp"

namespace ortops::ort {

namespace {

// ortops::DeviceLostError, or Vulkan-Hpp's vk::DeviceLostError should one escape the core
// unwrapped (by name: the glue does not include vulkan.hpp).
bool
isDeviceLost(const std::exception& e)
{
    return dynamic_cast<const DeviceLostError*>(&e) != nullptr ||
           std::strcmp(typeid(e).name(), "N2vk15DeviceLostErrorE") == 0;
}

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
statusFor(const OrtApi* api, const std::string& prefix, std::exception_ptr error) noexcept
{
    try {
        std::rethrow_exception(error);
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
    } catch (const std::exception& e) {
        if (isDeviceLost(e)) {
            return makeStatus(api, ORT_RUNTIME_EXCEPTION, prefix, "device lost: " + stripOrtopsPrefix(e.what()));
        }
        if (dynamic_cast<const std::invalid_argument*>(&e) != nullptr) {
            return makeStatus(api, ORT_INVALID_ARGUMENT, prefix, stripOrtopsPrefix(e.what()));
        }
        return makeStatus(api, ORT_FAIL, prefix, stripOrtopsPrefix(e.what()));
    } catch (...) {
        return makeStatus(api, ORT_FAIL, prefix, "unknown error (an exception not derived from std::exception)");
    }
}

} // namespace ortops::ort
