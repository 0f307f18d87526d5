// libortops_ort.so's one entry point: RegisterCustomOps, which every ONNX Runtime binding
// calls when a session's options register a custom-op library (C RegisterCustomOpsLibrary_V2,
// C++ Ort::SessionOptions::RegisterCustomOpsLibrary, C# RegisterCustomOpLibraryV2, Java
// registerCustomOpLibrary, Python register_custom_ops_library; docs/onnxruntime.md). It adds
// the domain "ortops" with LSTM, GRU, RNN (float32) and LSTM_f16, GRU_f16, RNN_f16 (float16)
// to the options. The library needs nothing from Python and links nothing of onnxruntime: the
// API comes from the OrtApiBase passed here.
#include <onnxruntime_c_api.h>

#include <array>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ort/kernel.hpp"

#if defined(_WIN32)
#define ORTOPS_EXPORT __declspec(dllexport)
#else
#define ORTOPS_EXPORT __attribute__((visibility("default")))
#endif

namespace ortops::ort {
namespace {

// The six ops, made once (thread-safe static initialisation) and never destroyed: the
// domain holds pointers to them for as long as any session may use it.
const std::array<OpDef, 6>&
ops()
{
    static const std::array<OpDef, 6>* all = [] {
        auto* a = new std::array<OpDef, 6>();
        size_t n = 0;
        for (ElementType t : { ElementType::Float32, ElementType::Float16 }) {
            for (const Cell& cell : CELLS) {
                defineOp((*a)[n++], cell, t);
            }
        }
        return a;
    }();
    return *all;
}

// One domain per onnxruntime in the process (an OrtCustomOpDomain is that runtime's object;
// two runtimes, say Python's wheel and a C++ program's libonnxruntime, can load this library
// at once), shared by every session options registered there. ORT requires a domain to
// outlive every session that used it and gives no signal when the last one ends, so the
// domains are kept for the life of the process and never released: releasing them from a
// static destructor would call into an onnxruntime that may be unloaded by then (this library
// does not depend on it). They stay reachable from here; the memory is a few hundred bytes.
std::mutex domainsLock;
std::vector<std::pair<const OrtApi*, OrtCustomOpDomain*>>* domains = nullptr;

OrtCustomOpDomain*
domainFor(const OrtApi* api)
{
    std::lock_guard<std::mutex> guard(domainsLock);
    if (domains == nullptr) {
        domains = new std::vector<std::pair<const OrtApi*, OrtCustomOpDomain*>>();
    }
    for (const auto& [a, d] : *domains) {
        if (a == api) {
            return d;
        }
    }
    OrtCustomOpDomain* domain = nullptr;
    if (OrtStatus* s = api->CreateCustomOpDomain("ortops", &domain)) {
        std::string m = std::string("ortops: CreateCustomOpDomain: ") + api->GetErrorMessage(s);
        api->ReleaseStatus(s);
        throw std::runtime_error(m);
    }
    for (const OpDef& op : ops()) {
        if (OrtStatus* s = api->CustomOpDomain_Add(domain, &op)) {
            std::string m = "ortops: CustomOpDomain_Add(" + op.name + "): " + api->GetErrorMessage(s);
            api->ReleaseStatus(s);
            api->ReleaseCustomOpDomain(domain);    // no session has seen it
            throw std::runtime_error(m);
        }
    }
    domains->emplace_back(api, domain);
    return domain;
}

} // namespace
} // namespace ortops::ort

extern "C" ORTOPS_EXPORT OrtStatus* ORT_API_CALL
RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* base)
{
    using namespace ortops::ort;
    if (base == nullptr) {
        return nullptr;    // nothing to report through: ORT always passes its OrtApiBase
    }
    const OrtApi* api = base->GetApi(ORT_API_REQUIRED);
    if (api == nullptr) {
        // An onnxruntime older than 1.16: report through the oldest API, which every one has.
        const OrtApi* oldest = base->GetApi(1);
        if (oldest == nullptr) {
            return nullptr;
        }
        std::string m;
        try {
            m = "ortops: libortops_ort.so needs onnxruntime 1.16 or later (ORT API " +
                std::to_string(ORT_API_REQUIRED) + "); this is onnxruntime " +
                (base->GetVersionString ? base->GetVersionString() : "of unknown version");
        } catch (...) {
        }
        return oldest->CreateStatus(ORT_NOT_IMPLEMENTED, m.c_str());
    }
    if (options == nullptr) {
        return api->CreateStatus(ORT_INVALID_ARGUMENT, "ortops: RegisterCustomOps called without session options");
    }
    try {
        OrtCustomOpDomain* domain = domainFor(api);
        if (OrtStatus* s = api->AddCustomOpDomain(options, domain)) {
            return s;
        }
        return nullptr;
    } catch (const std::exception& e) {
        return api->CreateStatus(ORT_FAIL, e.what());
    } catch (...) {
        return api->CreateStatus(ORT_FAIL, "ortops: RegisterCustomOps failed (unknown error)");
    }
}
