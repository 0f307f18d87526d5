// Errors into ONNX Runtime statuses, in one place any ORT door reuses (the custom ops,
// kernel.hpp; an execution-provider door): each typed error of the core and the glue maps to
// one OrtErrorCode, and the message is "<prefix><what>" with the core's "ortops: " taken off
// <what> (the prefix names the node: "ortops: LSTM node 'name': "). A lost device says
// "device lost". Nothing here throws: an exception that crossed into ONNX Runtime would
// terminate the process.
#pragma once

#include <onnxruntime_c_api.h>

#include <stdexcept>
#include <string>

#include "ort/plain.hpp"   // NodeError

namespace ortops::ort {

// A failed ORT API call, with ORT's code, carried to the entry point.
struct OrtCallError : std::runtime_error
{
    OrtErrorCode code;
    OrtCallError(OrtErrorCode c, const std::string& m) : std::runtime_error(m), code(c) {}
};

// Throws OrtCallError ("<what>: <ORT's message>") when `status` is an error; releases it.
void
check(const OrtApi* api, OrtStatus* status, const char* what);

// The status of the exception being handled (call it inside a catch block):
//   ConfigError, NodeError, InputError, other std::invalid_argument -> ORT_INVALID_ARGUMENT;
//   UnsupportedLayerError -> ORT_NOT_IMPLEMENTED; OrtCallError -> its code;
//   DeviceLostError (the core's, or Vulkan-Hpp's vk::DeviceLostError should one escape the
//   core unwrapped) -> ORT_RUNTIME_EXCEPTION "device lost: ..."; std::bad_alloc and anything
//   else -> ORT_FAIL.
OrtStatus*
currentExceptionStatus(const OrtApi* api, const std::string& prefix) noexcept;

// Runs f, turning every exception into an OrtStatus (nullptr when f returns normally).
template<typename F>
OrtStatus*
guarded(const OrtApi* api, const std::string& prefix, F&& f) noexcept
{
    try {
        f();
        return nullptr;
    } catch (...) {
        return currentExceptionStatus(api, prefix);
    }
}

} // namespace ortops::ort
