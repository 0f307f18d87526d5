// What both examples read and how they judge (main.cpp: the custom-op library; ep_main.cpp:
// the execution provider): stored tensors (NAME.bin raw little-endian values, NAME.shape
// "float32|int32 d0 d1 ...", written by make_data.py) and ortops.compare's scaled error.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

struct Stored
{
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    std::vector<int64_t> shape;
    std::vector<char> bytes;
};

inline Stored
load(const std::string& stem)
{
    Stored s;
    std::ifstream shapeFile(stem + ".shape"), data(stem + ".bin", std::ios::binary);
    if (!shapeFile || !data) {
        throw std::runtime_error("cannot read " + stem + ".shape/.bin");
    }
    std::string type;
    shapeFile >> type;
    if (type != "float32" && type != "int32") {
        throw std::runtime_error(stem + ": unsupported dtype " + type);
    }
    s.type = type == "int32" ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    for (int64_t d; shapeFile >> d;) {
        s.shape.push_back(d);
    }
    s.bytes.assign(std::istreambuf_iterator<char>(data), std::istreambuf_iterator<char>());
    return s;
}

// ortops.compare.scaled_error for float32: a shape mismatch or NaNs in different places is
// infinitely wrong; NaNs in the same places compare equal.
inline double
scaledError(const float* got, const std::vector<int64_t>& gotShape, const Stored& ref)
{
    if (gotShape != ref.shape) {
        return INFINITY;
    }
    const auto* e = reinterpret_cast<const float*>(ref.bytes.data());
    double diff = 0, scale = 0;
    for (size_t i = 0; i < ref.bytes.size() / sizeof(float); ++i) {
        if (std::isnan(got[i]) != std::isnan(e[i])) {
            return INFINITY;
        }
        if (std::isnan(e[i])) {
            continue;
        }
        diff = std::max(diff, std::fabs(double(got[i]) - double(e[i])));
        scale = std::max(scale, std::fabs(double(e[i])));
    }
    return scale > 0 ? diff / scale : diff;
}


// Feed the session DIR/inputs/<input name>, run it and judge each output against
// DIR/expected/<output name> (float32 tolerance 1e-5), printing one line per output.
inline bool
runAndCompare(Ort::Session& session, const std::string& dir)
{
    Ort::AllocatorWithDefaultOptions allocator;
    Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    std::vector<Ort::AllocatedStringPtr> names;
    std::vector<const char*> inNames, outNames;
    std::vector<Stored> feeds;
    std::vector<Ort::Value> inputs;
    feeds.reserve(session.GetInputCount());
    for (size_t i = 0; i < session.GetInputCount(); ++i) {
        names.push_back(session.GetInputNameAllocated(i, allocator));
        inNames.push_back(names.back().get());
        feeds.push_back(load(dir + "/inputs/" + inNames.back()));
        Stored& f = feeds.back();
        inputs.push_back(Ort::Value::CreateTensor(cpu, f.bytes.data(), f.bytes.size(), f.shape.data(),
                                                  f.shape.size(), f.type));
    }
    for (size_t i = 0; i < session.GetOutputCount(); ++i) {
        names.push_back(session.GetOutputNameAllocated(i, allocator));
        outNames.push_back(names.back().get());
    }
    std::vector<Ort::Value> outputs = session.Run(Ort::RunOptions{ nullptr }, inNames.data(), inputs.data(),
                                                  inputs.size(), outNames.data(), outNames.size());
    bool ok = true;
    for (size_t i = 0; i < outputs.size(); ++i) {
        Stored ref = load(dir + "/expected/" + outNames[i]);
        auto info = outputs[i].GetTensorTypeAndShapeInfo();
        double err = info.GetElementType() == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT
                       ? scaledError(outputs[i].GetTensorData<float>(), info.GetShape(), ref)
                       : INFINITY;
        bool pass = err <= 1e-5;
        ok = ok && pass;
        std::printf("%s: %zu values, scaled error %.3g against ONNX Runtime CPU (tolerance 1e-5): %s\n",
                    outNames[i], info.GetElementCount(), err, pass ? "ok" : "MISMATCH");
    }
    return ok;
}
