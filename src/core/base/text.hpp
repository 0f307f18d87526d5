// Small text helpers the core's readers of environment variables and options share.
#pragma once

#include <cctype>
#include <string>

namespace ortops::text {

inline std::string
lower(std::string s)
{
    for (char& ch : s) {
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    return s;
}

inline std::string
trim(const std::string& s)
{
    size_t a = s.find_first_not_of(" \t\r\n\f\v");
    size_t b = s.find_last_not_of(" \t\r\n\f\v");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

} // namespace ortops::text
