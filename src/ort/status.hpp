// The ONNX Runtime status mapping both ONNX Runtime doors share (the custom-op kernels,
// kernel.cpp, and the plugin execution provider, src/ep/): failed ORT calls carried as
// exceptions, and every exception turned into an OrtStatus at the C boundary, whose message is
// "ortops: <op> node '<name>': <what>" (the words "device lost" for a lost Vulkan device).
// Errors never cross the C boundary: an exception that reached ONNX Runtime would terminate
// the process.
#pragma once

#include <onnxruntime_c_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ortops::ort {

// A failed ORT API call, with ORT's code, carried to the entry point.
struct OrtCallError : std::runtime_error
{
    OrtErrorCode code;
    OrtCallError(OrtErrorCode c, const std::string& m) : std::runtime_error(m), code(c) {}
};

// The node does not fit the op (its inputs, outputs or config).
struct NodeError : std::invalid_argument
{
    using std::invalid_argument::invalid_argument;
};

// Throws OrtCallError("what: <ORT's message>") when `status` is an error (and releases it).
void
check(const OrtApi* api, OrtStatus* status, const char* what);

// The status for one exception: INVALID_ARGUMENT for a bad config, node or input,
// NOT_IMPLEMENTED for a layer the device cannot run, RUNTIME_EXCEPTION for a lost device,
// ORT's own code for a failed ORT call, else FAIL; the message `prefix` + what.
OrtStatus*
statusFor(const OrtApi* api, const std::string& prefix, std::exception_ptr error) noexcept;

// Runs f, turning every exception into an OrtStatus (nullptr when f returns normally).
template <typename F>
OrtStatus*
guarded(const OrtApi* api, const std::string& prefix, F&& f) noexcept
{
    try {
        f();
        return nullptr;
    } catch (...) {
        return statusFor(api, prefix, std::current_exception());
    }
}

// A string through ORT's two-call protocol: the first call asks the size (with the '\0'),
// the second fills it. The bytes are kept exactly (embedded NULs included).
template <typename Call>
std::string
twoCallString(const OrtApi* api, Call call, const char* what)
{
    size_t size = 0;
    check(api, call(nullptr, &size), what);
    if (size == 0) {
        return {};
    }
    std::string buffer(size, '\0');
    check(api, call(buffer.data(), &size), what);
    size = std::min(size, buffer.size());
    buffer.resize(size > 0 ? size - 1 : 0);    // drop the terminating '\0'
    return buffer;
}

} // namespace ortops::ort
