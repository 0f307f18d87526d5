// The cost model's calibrations on disk (costmodel.hpp): measured once per key, read by every
// process and door after. One JSON file,
//   {"calibrations": {<key>: {"cpu": {...}, "device": {"per_flop": s, "per_run": s,
//    "per_step": s}, "key": <key>}}, "format": 1}
// at $ORTOPS_COST_CACHE, else $XDG_CACHE_HOME/ortops/costmodel.json (default ~/.cache).
// Writers take an exclusive lock on "<file>.lock" (flock) and replace the file atomically (a
// temporary file in the same folder, renamed), so processes calibrating at once leave a whole
// file with every entry; readers need no lock.
#pragma once

#include <optional>
#include <string>

#include "placement/costmodel.hpp"

namespace ortops {

inline constexpr const char* COST_CACHE_ENV = "ORTOPS_COST_CACHE";
inline constexpr int COST_CACHE_FORMAT = 1;

// Where the cache is (see above).
std::string
costCachePath();

// The cached calibration of `key` in `path` (nullopt if there is none). A file that cannot be
// read or parsed counts as empty and `problem` (when given) says why ("cost model cache
// <path> unreadable (<why>); calibrating again"); a missing file or another format is silent.
std::optional<Calibration>
loadCalibration(const std::string& key, const std::string& path, std::string* problem = nullptr);

// Add `cal` to the cache at `path` (folders created), under its lock, replacing the file
// atomically. std::runtime_error naming the path when it cannot be written.
void
storeCalibration(const Calibration& cal, const std::string& path);

} // namespace ortops
