// What both examples read and how they judge (main.cpp: the custom-op library; ep_main.cpp:
// the execution provider): stored tensors (NAME.bin raw little-endian values, NAME.shape
// "float32|float16|int32|int64 d0 d1 ...", written by make_data.py) and ortops.compare's
// scaled error within the output dtype's tolerance (float32 1e-5, float16 2e-3).
#pragma once

#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

struct Stored
{
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    std::vector<int64_t> shape;
    std::vector<char> bytes;
};

// The dtype names of the .shape files.
inline const std::map<std::string, ONNXTensorElementDataType>&
storedTypes()
{
    static const std::map<std::string, ONNXTensorElementDataType> types{
        { "float32", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT },
        { "float16", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 },
        { "int32", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 },
        { "int64", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 },
    };
    return types;
}

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
    auto known = storedTypes().find(type);
    if (known == storedTypes().end()) {
        throw std::runtime_error(stem + ": unsupported dtype " + type);
    }
    s.type = known->second;
    for (int64_t d; shapeFile >> d;) {    // none for a scalar
        s.shape.push_back(d);
    }
    s.bytes.assign(std::istreambuf_iterator<char>(data), std::istreambuf_iterator<char>());
    return s;
}

// ortops.compare.tolerance: the largest scaled error accepted for outputs of `type` (float32
// results against a float64 reference; float16 ones computed in float32, rounded to half).
inline double
tolerance(ONNXTensorElementDataType type)
{
    return type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 ? 2e-3 : 1e-5;
}

// `count` float32 or float16 values as float (exact: every half is a float), to compare both
// dtypes alike; empty for another dtype.
inline std::vector<float>
asFloats(const void* data, ONNXTensorElementDataType type, size_t count)
{
    std::vector<float> v(count);
    if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        std::memcpy(v.data(), data, count * sizeof(float));
    } else if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) {
        const auto* h = static_cast<const uint16_t*>(data);
        std::transform(h, h + count, v.begin(),
                       [](uint16_t bits) { return Ort::Float16_t::FromBits(bits).ToFloat(); });
    } else {
        v.clear();
    }
    return v;
}

// ortops.compare.scaled_error: max|got - expected| / max|expected| (the plain difference where
// expected is all zeros). A shape or dtype mismatch, a dtype other than float32/float16 or
// NaNs in different places is infinitely wrong; NaNs in the same places compare equal.
inline double
scaledError(const Ort::Value& got, const Stored& ref)
{
    auto info = got.GetTensorTypeAndShapeInfo();
    if (info.GetShape() != ref.shape || info.GetElementType() != ref.type) {
        return INFINITY;
    }
    size_t n = info.GetElementCount();
    std::vector<float> g = asFloats(got.GetTensorRawData(), ref.type, n);
    std::vector<float> e = asFloats(ref.bytes.data(), ref.type, n);
    if (g.size() != n || ref.bytes.size() != n * (ref.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ? 4 : 2)) {
        return INFINITY;
    }
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; ++i) {
        if (std::isnan(g[i]) != std::isnan(e[i])) {
            return INFINITY;
        }
        if (std::isnan(e[i])) {
            continue;
        }
        diff = std::max(diff, std::fabs(double(g[i]) - double(e[i])));
        scale = std::max(scale, std::fabs(double(e[i])));
    }
    return scale > 0 ? diff / scale : diff;
}

// Feed the session DIR/inputs/<input name>, run it and judge each output against
// DIR/expected/<output name> within its dtype's tolerance, printing one line per output
// (each prefixed by `label`).
inline bool
runAndCompare(Ort::Session& session, const std::string& dir, const std::string& label = "")
{
    Ort::AllocatorWithDefaultOptions allocator;
    Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    std::vector<Ort::AllocatedStringPtr> names;
    std::vector<const char*> inNames, outNames;
    std::vector<Stored> feeds;
    std::vector<Ort::Value> inputs;
    feeds.reserve(session.GetInputCount());    // (the tensors point into the feeds' bytes)
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
        double err = scaledError(outputs[i], ref), tol = tolerance(ref.type);
        bool pass = err <= tol;
        ok = ok && pass;
        size_t count = outputs[i].GetTensorTypeAndShapeInfo().GetElementCount();
        std::printf("%s%s: %zu values, scaled error %.3g against ONNX Runtime CPU (tolerance %g): %s\n",
                    label.c_str(), outNames[i], count, err, tol, pass ? "ok" : "MISMATCH");
    }
    return ok;
}
