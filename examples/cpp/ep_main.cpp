// Runs an UNMODIFIED model (one of tests/models, standard ONNX LSTM nodes) in plain ONNX
// Runtime through its C++ API with ortops as a plugin execution provider: registers the
// library (Env::RegisterExecutionProviderLibrary), chooses the ortops EP device
// (Env::GetEpDevices, SessionOptions::AppendExecutionProvider_V2, ortops first and ONNX
// Runtime's CPU provider for every other node), checks with ONNX Runtime's own report
// (session.record_ep_graph_assignment_info, Session::GetEpGraphAssignmentInfo, ORT 1.24+)
// that every recurrent node of the main graph went to the ortops EP, and compares the outputs
// with stored ONNX Runtime CPU outputs (float32 tolerance 1e-5). No Python at run time.
//
//   ortops_ep_example DATA_DIR LIBRARY
// DATA_DIR holds model.onnx, recurrent.txt (the main graph's recurrent node names, one a
// line), inputs/ and expected/ as main.cpp reads them (make_data.py writes them into ep/).
#include <onnxruntime_cxx_api.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "data.hpp"

static const char* const EP_NAME = "OrtopsExecutionProvider";

// The nodes ONNX Runtime assigned to `ep`.
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

static bool
checkAssignment(const Ort::Session& session, const std::string& dir)
{
    std::set<std::string> onEp = assignedTo(session, EP_NAME);
    std::ifstream list(dir + "/recurrent.txt");
    bool ok = true;
    size_t count = 0;
    for (std::string name; std::getline(list, name);) {
        bool there = onEp.count(name) > 0;
        ok = ok && there;
        ++count;
        std::printf("node '%s': %s\n", name.c_str(), there ? "assigned to OrtopsExecutionProvider" : "NOT on the ortops EP");
    }
    if (count == 0) {
        std::printf("recurrent.txt lists no node\n");
        return false;
    }
    return ok;
}

int
main(int argc, char** argv)
try {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s DATA_DIR LIBRARY (libortops_ort.so; python -c "
                             "'import ortops; print(ortops.ep_library_path())')\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "ortops_ep_example");
    // An absolute path: ONNX Runtime resolves a relative one against its own library's folder.
    const std::string library = std::filesystem::absolute(argv[2]).string();
    env.RegisterExecutionProviderLibrary("ortops", library);    // calls the library's CreateEpFactories
    std::vector<Ort::ConstEpDevice> chosen;
    for (const Ort::ConstEpDevice& d : env.GetEpDevices()) {
        if (std::string(d.EpName()) == EP_NAME && chosen.empty()) {
            chosen.push_back(d);
            Ort::ConstKeyValuePairs meta = d.EpMetadata();
            std::printf("ortops EP device: %s (Vulkan UUID %s)\n", meta.GetValue("vulkan_device_name"),
                        meta.GetValue("vulkan_uuid"));
        }
    }
    if (chosen.empty()) {
        std::fprintf(stderr, "ortops_ep_example: the library offered no EP device (no usable Vulkan device)\n");
        return 1;
    }
    bool ok = false;
    {
        Ort::SessionOptions options;
        options.AddConfigEntry("session.record_ep_graph_assignment_info", "1");
        std::unordered_map<std::string, std::string> epOptions{ { "mode", "deterministic" } };
        options.AppendExecutionProvider_V2(env, chosen, epOptions);
        Ort::Session session(env, (dir + "/model.onnx").c_str(), options);
        bool assigned = checkAssignment(session, dir);
        bool close = runAndCompare(session, dir);
        ok = assigned && close;
    }
    env.UnregisterExecutionProviderLibrary("ortops");    // after the last session that used it
    return ok ? 0 : 1;
} catch (const std::exception& e) {
    std::fprintf(stderr, "ortops_ep_example: %s\n", e.what());
    return 1;
}
