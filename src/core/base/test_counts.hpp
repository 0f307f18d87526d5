// Counts of named events a door records for the tests, built only into a test build
// (ORTOPS_TESTING): e.g. the EP's reads of a node's attributes through ONNX Runtime's getters,
// so that a test can show each attribute is read once per GetCapability or Compile call
// (tests/test_session_ep.py, through ortops._vk.test_counts). In a shipping build countEvent is an
// empty inline function and the rest does not exist.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ortops {

#ifdef ORTOPS_TESTING

void
countEvent(const std::string& name, uint64_t n = 1);

// Every count so far, and clear them.
std::map<std::string, uint64_t>
takeEventCounts();

#else

inline void
countEvent(const std::string&, uint64_t = 1)
{
}

#endif

} // namespace ortops
