// Placement "auto"'s ORT CPU side, measured where no Python exists: the calibration LSTM
// (calibration.hpp) as a one-node ONNX model serialized here (onnx_model.cpp), run in an ORT
// CPU session through the C API of the onnxruntime that loaded the EP.
#pragma once

#include <onnxruntime_c_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ort/core.hpp"    // the core's headers, with the visibility they need

namespace ortops::ep {

// The ModelProto bytes of one ai.onnx LSTM (opset 14, IR 8): input X float32 [seq, batch,
// input] (seq and batch symbolic), initializers W and R, hidden_size, output Y.
std::string
lstmModelBytes(uint32_t input, uint32_t hidden, const std::vector<float>& W, const std::vector<float>& R);

// CpuLstmRunner through ORT's C API: each LSTM a CPU-only session of default thread count.
class OrtCpuRunner : public CpuLstmRunner
{
  public:
    explicit OrtCpuRunner(const OrtApi* api);
    ~OrtCpuRunner() override;
    OrtCpuRunner(const OrtCpuRunner&) = delete;
    OrtCpuRunner& operator=(const OrtCpuRunner&) = delete;

    std::unique_ptr<CpuLstm> make(uint32_t input, uint32_t hidden, const std::vector<float>& W,
                                  const std::vector<float>& R) override;

  private:
    const OrtApi* api_;
    OrtEnv* env_ = nullptr;    // ORT's one environment (CreateEnv returns it, counted)
};

} // namespace ortops::ep
