// Test hooks of the native core (both doors bind them for the tests): a fault injected into
// every later run, so that tests can check how a wrong or failing node is reported.
#pragma once

#include <cstddef>
#include <string>

namespace ortops {

// Every run after this fails ("fail": InputError "failure injected by the test") or has its
// float outputs changed ("scale": times value, "add": plus value). "" switches it off.
void
injectFault(const std::string& kind, double value);

// The run path's hooks: whether the run fails, and its outputs (n elements) changed.
bool
faultFails();
void
applyFault(void* out, size_t n, bool float16);

} // namespace ortops
