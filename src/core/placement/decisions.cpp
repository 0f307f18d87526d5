// The EP's decisions per session (decisions.hpp).
#include "placement/decisions.hpp"

#include <deque>
#include <map>
#include <mutex>

namespace ortops {

namespace {

constexpr size_t MAX_REPORTS = 256;

struct Registry
{
    std::mutex lock;
    std::map<std::string, std::vector<NodeDecision>> reports;
    std::deque<std::string> order;    // report keys, oldest first
};

Registry&
registry()
{
    static Registry* r = new Registry;    // never destroyed: EPs may record while the process exits
    return *r;
}

} // namespace

std::string
pathStep(const std::string& opType, const std::string& name, const std::string& graph)
{
    return opType + " " + name + " " + graph + "\n";
}

std::string
nodeKey(const std::string& path, const std::string& name, const std::string& opType)
{
    return path + name + "\n" + opType;
}

std::string
outputsKey(const std::vector<std::string>& outputs)
{
    size_t named = outputs.size();
    while (named > 0 && outputs[named - 1].empty()) {
        --named;    // a trailing unnamed output is one a reader may or may not list
    }
    std::string key;
    for (size_t i = 0; i < named; ++i) {
        key += (i ? "\n" : "") + outputs[i];
    }
    return key;
}

NodeDecision
decisionOf(const std::string& path, const NodeDescription& node, const NodeVerdict& v)
{
    NodeDecision d;
    d.key = nodeKey(path, node.name, node.opType);
    d.outputsKey = outputsKey(node.outputs);
    d.name = node.name;
    d.opType = node.opType;
    d.taken = v.taken;
    d.reason = v.reason;
    d.dtype = v.dtype;
    d.direction = v.direction;
    d.layout = v.layout;
    d.hiddenSize = v.hiddenSize;
    if (v.taken) {
        d.weights = v.weights;
        d.outputs = v.config.outputs;
        d.config = encodeNodeConfig(v.config);
    }
    return d;
}

void
recordDecision(const std::string& reportId, const NodeDecision& decision)
{
    if (reportId.empty()) {
        return;
    }
    Registry& r = registry();
    std::lock_guard<std::mutex> guard(r.lock);
    auto it = r.reports.find(reportId);
    if (it == r.reports.end()) {
        if (r.order.size() >= MAX_REPORTS) {
            r.reports.erase(r.order.front());
            r.order.pop_front();
        }
        it = r.reports.emplace(reportId, std::vector<NodeDecision>{}).first;
        r.order.push_back(reportId);
    }
    for (NodeDecision& d : it->second) {
        if (d.key == decision.key && d.outputsKey == decision.outputsKey) {
            d = decision;
            return;
        }
    }
    it->second.push_back(decision);
}

std::vector<NodeDecision>
decisionsFor(const std::string& reportId)
{
    Registry& r = registry();
    std::lock_guard<std::mutex> guard(r.lock);
    auto it = r.reports.find(reportId);
    return it == r.reports.end() ? std::vector<NodeDecision>{} : it->second;
}

void
forgetDecisions(const std::string& reportId)
{
    Registry& r = registry();
    std::lock_guard<std::mutex> guard(r.lock);
    if (r.reports.erase(reportId) > 0) {
        for (auto it = r.order.begin(); it != r.order.end(); ++it) {
            if (*it == reportId) {
                r.order.erase(it);
                break;
            }
        }
    }
}

} // namespace ortops
