// Runs a model converted by ortops.convert in plain ONNX Runtime through its C++ API, with the
// ortops custom-op library registered, and checks the outputs against stored ONNX Runtime CPU
// outputs of the original model (scaled error max|got - ref| / max|ref|, ortops/compare.py;
// float32 tolerance 1e-5). No Python at run time.
//
//   ortops_example DATA_DIR LIBRARY
// DATA_DIR holds model.onnx, inputs/NAME.{bin,shape} and expected/NAME.{bin,shape} (run.sh
// writes them): NAME.bin raw little-endian values, NAME.shape "float32|int32 d0 d1 ...".
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

struct Stored
{
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    std::vector<int64_t> shape;
    std::vector<char> bytes;
};

static Stored
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
static double
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

int
main(int argc, char** argv)
try {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s DATA_DIR LIBRARY (libortops_ort.so; python -c "
                             "'import ortops; print(ortops.library_path())')\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "ortops_example");
    Ort::SessionOptions options;
    options.RegisterCustomOpsLibrary(argv[2]);    // calls the library's RegisterCustomOps
    Ort::Session session(env, (dir + "/model.onnx").c_str(), options);

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
    return ok ? 0 : 1;
} catch (const std::exception& e) {
    std::fprintf(stderr, "ortops_example: %s\n", e.what());
    return 1;
}
