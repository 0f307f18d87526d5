// ortops_core_tests' entry point: doctest's own main (its command line: -ts=<suite> to run one
// suite, e.g. -ts=concurrency, the ThreadSanitizer job's; -tc=<case>; -s to show successes).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
