// The ORT CPU side of placement "auto"'s calibration through ONNX Runtime's C API (cpu_side.hpp).
#include "ep/cpu_side.hpp"

#include "ort/status.hpp"

namespace ortops::ep {

using ort::check;

namespace {

// One calibration LSTM in its own CPU session (no EP registered: ORT's CPU kernel).
class OrtCpuLstm : public CpuLstm
{
  public:
    OrtCpuLstm(const OrtApi* api, OrtEnv* env, const std::string& model, uint32_t input) : api_(api), input_(input)
    {
        OrtSessionOptions* options = nullptr;
        check(api, api->CreateSessionOptions(&options), "CreateSessionOptions");
        OrtStatus* s = api->CreateSessionFromArray(env, model.data(), model.size(), options, &session_);
        api->ReleaseSessionOptions(options);
        check(api, s, "CreateSessionFromArray (the calibration LSTM)");
        check(api, api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory_), "CreateCpuMemoryInfo");
    }
    ~OrtCpuLstm() override
    {
        if (memory_) {
            api_->ReleaseMemoryInfo(memory_);
        }
        if (session_) {
            api_->ReleaseSession(session_);
        }
    }
    OrtCpuLstm(const OrtCpuLstm&) = delete;
    OrtCpuLstm& operator=(const OrtCpuLstm&) = delete;

    void run(const std::vector<float>& x, uint32_t seq, uint32_t batch) override
    {
        const int64_t shape[3] = { seq, batch, input_ };
        OrtValue* in = nullptr;
        check(api_,
              api_->CreateTensorWithDataAsOrtValue(memory_, const_cast<float*>(x.data()), x.size() * sizeof(float), shape,
                                                   3, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &in),
              "CreateTensorWithDataAsOrtValue");
        const char* inputs[] = { "X" };
        const char* outputs[] = { "Y" };
        OrtValue* out = nullptr;
        OrtStatus* s = api_->Run(session_, nullptr, inputs, &in, 1, outputs, 1, &out);
        api_->ReleaseValue(in);
        if (out) {
            api_->ReleaseValue(out);
        }
        check(api_, s, "Run (the calibration LSTM)");
    }

  private:
    const OrtApi* api_;
    int64_t input_;
    OrtSession* session_ = nullptr;
    OrtMemoryInfo* memory_ = nullptr;
};

} // namespace

OrtCpuRunner::OrtCpuRunner(const OrtApi* api) : api_(api)
{
    // The process's environment exists (a session is being created): CreateEnv hands it back.
    check(api, api->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ortops-calibration", &env_), "CreateEnv");
}

OrtCpuRunner::~OrtCpuRunner()
{
    if (env_) {
        api_->ReleaseEnv(env_);
    }
}

std::unique_ptr<CpuLstm>
OrtCpuRunner::make(uint32_t input, uint32_t hidden, const std::vector<float>& W, const std::vector<float>& R)
{
    return std::make_unique<OrtCpuLstm>(api_, env_, lstmModelBytes(input, hidden, W, R), input);
}

} // namespace ortops::ep
