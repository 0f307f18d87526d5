// Runs UNMODIFIED models (every one the tests run: tests/models, the sample models of
// scripts/make_models.py in float32 and float16, silero-vad's third-party ones) in plain ONNX
// Runtime through its C++ API with ortops as a plugin execution provider: registers the
// library once (Env::RegisterExecutionProviderLibrary), chooses the ortops EP device
// (Env::GetEpDevices), and for each case makes a session with ortops first and ONNX Runtime's
// CPU provider for every other node (SessionOptions::AppendExecutionProvider_V2), checks with
// ONNX Runtime's own report (session.record_ep_graph_assignment_info,
// Session::GetEpGraphAssignmentInfo, ORT 1.24+) that every recurrent node, the main graph's and
// those inside If/Loop/Scan bodies, went to the ortops EP, and compares the outputs with stored
// ONNX Runtime CPU outputs (scaled error within the dtype's tolerance: float32 1e-5, float16
// 2e-3). One summary line per case; exit status 1 if any case fails. No Python at run time.
//
//   ortops_ep_example DATA_DIR LIBRARY
// DATA_DIR holds one folder per case (run in name order), each with model.onnx, recurrent.txt
// (its recurrent node names, one a line; none for a model without one), inputs/ and expected/
// as main.cpp reads them (make_data.py writes them into ep/).
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "data.hpp"

static const char* const EP_NAME = "OrtopsExecutionProvider";

// The nodes ONNX Runtime assigned to `ep`, main graph and bodies alike.
static std::set<std::string>
assignedTo(const Ort::Session& session, const std::string& ep)
{
    std::set<std::string> nodes;
    for (const auto& subgraph : session.GetEpGraphAssignmentInfo()) {
        if (subgraph.GetEpName() == ep) {
            for (const auto& node : subgraph.GetNodes()) {
                nodes.insert(node.GetName());
            }
        }
    }
    return nodes;
}

struct Assignment
{
    size_t listed = 0, onEp = 0;
};

// How many of the case's recurrent nodes (recurrent.txt) ONNX Runtime gave the ortops EP;
// each one it did not is named.
static Assignment
checkAssignment(const Ort::Session& session, const std::string& dir, const std::string& name)
{
    std::set<std::string> onEp = assignedTo(session, EP_NAME);
    std::ifstream list(dir + "/recurrent.txt");
    if (!list) {
        throw std::runtime_error("cannot read " + dir + "/recurrent.txt");
    }
    Assignment a;
    for (std::string node; std::getline(list, node);) {
        ++a.listed;
        if (onEp.count(node)) {
            ++a.onEp;
        } else {
            std::printf("  %s: node '%s' NOT on %s\n", name.c_str(), node.c_str(), EP_NAME);
        }
    }
    return a;
}

// One case: a session with the ortops EP first, its assignment and its outputs judged. A
// failure to create or run the session fails this case only (the message names it).
static bool
runCase(Ort::Env& env, const std::vector<Ort::ConstEpDevice>& chosen, const std::string& dir,
        const std::string& name, size_t& listedNodes)
{
    auto start = std::chrono::steady_clock::now();
    try {
        Ort::SessionOptions options;
        // Errors only: ORT warns, for every session, that nodes went to the CPU provider,
        // which is the point here (ortops takes the recurrent nodes, CPU the rest).
        options.SetLogSeverityLevel(ORT_LOGGING_LEVEL_ERROR);
        options.AddConfigEntry("session.record_ep_graph_assignment_info", "1");
        // placement gpu: every recurrent node the device can run goes to it, lavapipe's too
        // (whose default placement, auto, leaves to ORT CPU the nodes it runs faster).
        std::unordered_map<std::string, std::string> epOptions{ { "mode", "deterministic" }, { "placement", "gpu" } };
        options.AppendExecutionProvider_V2(env, chosen, epOptions);
        Ort::Session session(env, (dir + "/model.onnx").c_str(), options);
        Assignment a = checkAssignment(session, dir, name);
        bool close = runAndCompare(session, dir, "  " + name + ": ");
        bool ok = a.onEp == a.listed && close;
        listedNodes += a.listed;
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("%s: %s: %zu/%zu recurrent nodes on %s, outputs %s (%.1f s)\n", ok ? "ok  " : "FAIL",
                    name.c_str(), a.onEp, a.listed, EP_NAME, close ? "within tolerance" : "NOT within tolerance",
                    seconds);
        return ok;
    } catch (const std::exception& e) {
        std::printf("FAIL: %s: %s\n", name.c_str(), e.what());
        return false;
    }
}

// The case folders of DATA_DIR, in name order.
static std::vector<std::filesystem::path>
caseFolders(const std::string& dataDir)
{
    std::vector<std::filesystem::path> cases;
    for (const auto& entry : std::filesystem::directory_iterator(dataDir)) {
        if (entry.is_directory()) {
            cases.push_back(entry.path());
        }
    }
    std::sort(cases.begin(), cases.end());
    if (cases.empty()) {
        throw std::runtime_error("no case folder in " + dataDir + " (examples/cpp/make_data.py writes them)");
    }
    return cases;
}

// The first ortops EP device (one per Vulkan device); none if the library offered none.
static std::vector<Ort::ConstEpDevice>
chooseDevice(Ort::Env& env)
{
    std::vector<Ort::ConstEpDevice> chosen;
    for (const Ort::ConstEpDevice& d : env.GetEpDevices()) {
        if (std::string(d.EpName()) == EP_NAME && chosen.empty()) {
            chosen.push_back(d);
            Ort::ConstKeyValuePairs meta = d.EpMetadata();
            std::printf("ortops EP device: %s (Vulkan UUID %s)\n", meta.GetValue("vulkan_device_name"),
                        meta.GetValue("vulkan_uuid"));
        }
    }
    return chosen;
}

int
main(int argc, char** argv)
try {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s DATA_DIR LIBRARY (libortops_ort.so; python -c "
                             "'import ortops; print(ortops.ep_library_path())')\n", argv[0]);
        return 2;
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);    // lines in order with ONNX Runtime's on stderr
    const std::vector<std::filesystem::path> cases = caseFolders(argv[1]);
    Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "ortops_ep_example");
    // An absolute path: ONNX Runtime resolves a relative one against its own library's folder.
    const std::string library = std::filesystem::absolute(argv[2]).string();
    env.RegisterExecutionProviderLibrary("ortops", library);    // calls the library's CreateEpFactories
    std::vector<Ort::ConstEpDevice> chosen = chooseDevice(env);
    if (chosen.empty()) {
        std::fprintf(stderr, "ortops_ep_example: the library offered no EP device "
                             "(no usable Vulkan device)\n");
        return 1;
    }
    size_t failed = 0, listedNodes = 0;
    for (const auto& dir : cases) {
        failed += runCase(env, chosen, dir.string(), dir.filename().string(), listedNodes) ? 0 : 1;
    }
    env.UnregisterExecutionProviderLibrary("ortops");    // after the last session that used it
    // A data folder whose lists were all empty would check no assignment at all.
    if (listedNodes == 0) {
        std::printf("ortops_ep_example: no case lists a recurrent node: the assignment went unchecked\n");
        return 1;
    }
    std::printf("ortops_ep_example: %zu of %zu cases passed (%zu recurrent nodes checked)\n",
                cases.size() - failed, cases.size(), listedNodes);
    return failed == 0 ? 0 : 1;
} catch (const std::exception& e) {
    std::fprintf(stderr, "ortops_ep_example: %s\n", e.what());
    return 1;
}
