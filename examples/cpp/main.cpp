// Runs a model converted by ortops.convert in plain ONNX Runtime through its C++ API, with the
// ortops custom-op library registered, and checks the outputs against stored ONNX Runtime CPU
// outputs of the original model (scaled error max|got - ref| / max|ref|, ortops/compare.py;
// float32 tolerance 1e-5). No Python at run time.
//
//   ortops_example DATA_DIR LIBRARY
// DATA_DIR holds model.onnx, inputs/NAME.{bin,shape} and expected/NAME.{bin,shape} (run.sh
// writes them): NAME.bin raw little-endian values, NAME.shape "float32|int32 d0 d1 ...".
#include <onnxruntime_cxx_api.h>

#include <cstdio>
#include <string>
#include <vector>

#include "data.hpp"

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

    return runAndCompare(session, dir) ? 0 : 1;
} catch (const std::exception& e) {
    std::fprintf(stderr, "ortops_example: %s\n", e.what());
    return 1;
}
