// The calibrations' cache file (costcache.hpp).
#include "placement/costcache.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "config/json.hpp"

#if !defined(_WIN32)
#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <unistd.h>
#endif

namespace ortops {

namespace {

namespace fs = std::filesystem;

// Large enough for thousands of keys; the reader's own limits stay on.
constexpr size_t MAX_CACHE_BYTES = 16u << 20;

std::string
homeDirectory()
{
    if (const char* home = std::getenv("HOME"); home && *home) {
        return home;
    }
#if !defined(_WIN32)
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) {
        return pw->pw_dir;
    }
#endif
    return ".";
}

json::Value
sideJson(const Side& s)
{
    return json::Value::object({ { "per_run", json::Value::fromNumber(s.perRun) },
                                 { "per_step", json::Value::fromNumber(s.perStep) },
                                 { "per_flop", json::Value::fromNumber(s.perFlop) } });
}

json::Value
calibrationJson(const Calibration& c)
{
    return json::Value::object(
      { { "key", json::Value::fromString(c.key) }, { "device", sideJson(c.device) }, { "cpu", sideJson(c.cpu) } });
}

// A side read back; nullopt when a field is missing or not a number.
std::optional<Side>
sideOf(const json::Value* v)
{
    if (v == nullptr || v->type != json::Type::Object) {
        return std::nullopt;
    }
    Side s;
    for (auto [name, field] : { std::pair{ "per_run", &s.perRun }, { "per_step", &s.perStep }, { "per_flop", &s.perFlop } }) {
        const json::Value* f = v->find(name);
        if (f == nullptr || !f->isNumeric()) {
            return std::nullopt;
        }
        *field = f->number;
    }
    return s;
}

// The "calibrations" object of the file (an empty object when missing, of another format, or
// unreadable; `problem` says why for the last).
json::Value
readEntries(const std::string& path, std::string* problem)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return json::Value::object();
    }
    std::ostringstream text;
    text << in.rdbuf();
    try {
        json::Value doc = json::parse(text.str(), json::ParseOptions{ MAX_CACHE_BYTES, json::DEFAULT_MAX_DEPTH, {} });
        const json::Value* format = doc.find("format");
        const json::Value* entries = doc.find("calibrations");
        bool ours = doc.type == json::Type::Object && format && format->type == json::Type::Integer &&
                    format->integer == COST_CACHE_FORMAT && entries && entries->type == json::Type::Object;
        return ours ? *entries : json::Value::object();
    } catch (const std::exception& e) {
        if (problem) {
            *problem = "cost model cache " + path + " unreadable (" + e.what() + "); calibrating again";
        }
        return json::Value::object();
    }
}

// An exclusive lock on "<path>.lock" for the writer's whole read-modify-replace.
class FileLock
{
  public:
    explicit FileLock(const std::string& path)
    {
#if !defined(_WIN32)
        fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) {
            throw std::runtime_error("ortops: cannot open the cost model cache's lock " + path + ".lock: " +
                                     std::strerror(errno));
        }
        while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
        }
#endif
    }
    ~FileLock()
    {
#if !defined(_WIN32)
        if (fd_ >= 0) {
            ::flock(fd_, LOCK_UN);
            ::close(fd_);
        }
#endif
    }
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

  private:
    int fd_ = -1;
};

// Write `text` to a temporary file beside `path` and rename it over `path`.
void
replaceAtomically(const std::string& path, const std::string& text)
{
    fs::path dir = fs::absolute(path).parent_path();
    std::string tmp = (dir / ".costmodel-XXXXXX").string();
    int fd = ::mkstemp(tmp.data());
    if (fd < 0) {
        throw std::runtime_error("ortops: cannot write the cost model cache in " + dir.string() + ": " + std::strerror(errno));
    }
    bool ok = true;
    for (size_t done = 0; ok && done < text.size();) {
        ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        ok = n > 0 || (n < 0 && errno == EINTR);
        done += n > 0 ? static_cast<size_t>(n) : 0;
    }
    ok = (::close(fd) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::string why = std::strerror(errno);
        ::unlink(tmp.c_str());
        throw std::runtime_error("ortops: cannot write the cost model cache " + path + ": " + why);
    }
}

} // namespace

std::string
costCachePath()
{
    if (const char* env = std::getenv(COST_CACHE_ENV); env && *env) {
        return env;
    }
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    fs::path base = (xdg && *xdg) ? fs::path(xdg) : fs::path(homeDirectory()) / ".cache";
    return (base / "ortops" / "costmodel.json").string();
}

std::optional<Calibration>
loadCalibration(const std::string& key, const std::string& path, std::string* problem)
{
    json::Value entries = readEntries(path, problem);
    const json::Value* entry = entries.find(key);
    if (entry == nullptr || entry->type != json::Type::Object) {
        return std::nullopt;
    }
    const json::Value* storedKey = entry->find("key");
    std::optional<Side> device = sideOf(entry->find("device"));
    std::optional<Side> cpu = sideOf(entry->find("cpu"));
    if (!storedKey || storedKey->type != json::Type::String || !device || !cpu) {
        return std::nullopt;
    }
    return Calibration{ storedKey->string, *device, *cpu };
}

void
storeCalibration(const Calibration& cal, const std::string& path)
{
    std::error_code ec;
    fs::create_directories(fs::absolute(path).parent_path(), ec);
    FileLock lock(path);
    json::Value entries = readEntries(path, nullptr);
    bool replaced = false;
    for (auto& [k, v] : entries.members) {
        if (k == cal.key) {
            v = calibrationJson(cal);
            replaced = true;
        }
    }
    if (!replaced) {
        entries.members.emplace_back(cal.key, calibrationJson(cal));
    }
    json::Value doc = json::Value::object(
      { { "format", json::Value::fromInteger(COST_CACHE_FORMAT) }, { "calibrations", std::move(entries) } });
    replaceAtomically(path, json::write(doc) + "\n");
}

} // namespace ortops
