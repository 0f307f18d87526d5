// Test hooks of the native core, built only into a test build (the CMake option
// ORTOPS_TESTING, which scripts/setup.sh switches on and a wheel leaves off): a fault injected
// into every later run, so that tests can check how a wrong or failing node is reported. In a
// shipping build the run path's hooks are empty inline functions, and injectFault does not
// exist (the Python door binds it only under the same macro).
#pragma once

#include <cstddef>
#include <string>

namespace ortops {

#ifdef ORTOPS_TESTING

// Every run after this fails ("fail": InputError "failure injected by the test") or has its
// float outputs changed ("scale": times value, "add": plus value). "" switches it off.
void
injectFault(const std::string& kind, double value);

// The run path's hooks: whether the run fails, and its outputs (n elements) changed.
bool
faultFails();
void
applyFault(void* out, size_t n, bool float16);

#else

inline bool
faultFails()
{
    return false;
}
inline void
applyFault(void*, size_t, bool)
{
}

#endif

} // namespace ortops
