// ortops_core_tests' entry point: doctest's main (its command line: -ts=<suite> to run one
// suite, e.g. -ts=concurrency, the ThreadSanitizer job's; -tc=<case>; -s to show successes),
// and the validation layer's verdict. Under ORTOPS_VALIDATION=1 (with VK_LAYER_SETTINGS_PATH
// naming tests/vk_layer_settings.txt: synchronization validation) every context the core makes
// has the layer, whose warnings and errors the core collects (vk/context.hpp, takeMessages), as
// the Python suite's --vk-validation does: each test case's messages are taken when it ends, and
// any message fails the run, naming the case that caused it. Last it says, for every device a
// persistent grid ran on, how many grids ran and how many went to the step kernels: the tests
// allow a fallback (it gives the same bits), and this line is where a real GPU's shows.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rnn/persistent.hpp"
#include "vk/context.hpp"
#include "vk/devices.hpp"

namespace {

std::mutex g_lock;
std::vector<std::pair<std::string, std::string>> g_found;   // (test case, message)

struct ValidationListener : doctest::IReporter
{
    explicit ValidationListener(const doctest::ContextOptions&) {}

    void test_case_end(const doctest::CurrentTestCaseStats&) override { take(); }
    void test_case_exception(const doctest::TestCaseException&) override { take(); }
    void test_case_start(const doctest::TestCaseData& tc) override
    {
        take();   // what came between cases goes to the one before
        std::lock_guard<std::mutex> lock(g_lock);
        current = tc.m_name;
    }

    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}

  private:
    void take()
    {
        std::vector<std::string> messages = ortops::takeMessages();
        std::lock_guard<std::mutex> lock(g_lock);
        for (auto& m : messages) {
            g_found.emplace_back(current, std::move(m));
        }
    }

    std::string current = "(before the first test case)";
};

REGISTER_LISTENER("validation", 1, ValidationListener);

void
reportPersistentGrids()
{
    std::vector<ortops::DeviceDescription> found;
    try {
        found = ortops::devices();
    } catch (const std::exception&) {
        return;   // no Vulkan device: no grid ran
    }
    for (const ortops::DeviceDescription& d : found) {
        ortops::PersistentState s = ortops::persistentState(d.index);
        if (s.runs == 0 && s.fallbacks == 0) {
            continue;
        }
        std::printf("persistent grids on %s: %llu ran, %llu went to the step kernels%s%s\n",
                    ortops::deviceLabel(d).c_str(), static_cast<unsigned long long>(s.runs),
                    static_cast<unsigned long long>(s.fallbacks), s.off ? "; marked: " : "",
                    s.why.c_str());
    }
}

} // namespace

int
main(int argc, char** argv)
{
    doctest::Context context(argc, argv);
    int status = context.run();
    reportPersistentGrids();
    for (const auto& [testCase, message] : g_found) {
        std::fprintf(stderr, "validation message in \"%s\": %s\n", testCase.c_str(), message.c_str());
    }
    if (!g_found.empty()) {
        std::fprintf(stderr, "ortops_core_tests: %zu validation message(s): the run fails\n", g_found.size());
        return status != 0 ? status : 1;
    }
    return status;
}
