// ONNX Runtime's values and strings as the core takes them: an input OrtValue as a HostTensor
// on ORT's buffer (no copy), element types both ways, and strings through ORT's two-call
// protocol.
#pragma once

#include <onnxruntime_c_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ort/status.hpp"
#include "ort/core.hpp"   // the core's headers, with the visibility they need

namespace ortops::ort {

ONNXTensorElementDataType
ortType(ElementType t);

// numpy-style names of ONNX's element types (TensorProto.DataType order).
std::string
ortTypeName(ONNXTensorElementDataType t);

std::string
shapeText(const std::vector<int64_t>& shape);

// An input's OrtValue as a HostTensor on ORT's buffer (no copy), of element type `want`;
// InputError naming the input when it has another.
HostTensor
hostTensor(const OrtApi* api, const OrtValue* value, std::string_view name, ElementType want);

// A tensor's bytes; InputError for a negative dimension or a size beyond size_t.
size_t
byteSize(const HostTensor& t);

// A string through ORT's two-call protocol: the first call asks the size (with the '\0'),
// the second fills it. The bytes are kept exactly (embedded NULs included).
template<typename Call>
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
