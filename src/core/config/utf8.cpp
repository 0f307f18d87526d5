// UTF-8 decoding and encoding (utf8.hpp).
#include "config/utf8.hpp"

namespace ortops::utf8 {

const char*
decode(const unsigned char* p, size_t n, size_t& length, uint32_t& cp)
{
    unsigned char b0 = p[0];
    if (b0 < 0x80) {
        length = 1;
        cp = b0;
        return nullptr;
    }
    if (b0 < 0xC0) {
        return "invalid UTF-8 (a continuation byte where a character starts)";
    }
    if (b0 < 0xC2) {
        return "invalid UTF-8 (overlong encoding)";
    }
    if (b0 > 0xF4) {
        return b0 < 0xF8 ? "invalid UTF-8 (code point above U+10FFFF)" : "invalid UTF-8 (byte 0xF8..0xFF)";
    }
    size_t need = b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
    unsigned char lo = 0x80, hi = 0xBF;
    const char* narrow = nullptr;
    if (b0 == 0xE0) {
        lo = 0xA0;
        narrow = "invalid UTF-8 (overlong encoding)";
    } else if (b0 == 0xED) {
        hi = 0x9F;
        narrow = "invalid UTF-8 (UTF-16 surrogate)";
    } else if (b0 == 0xF0) {
        lo = 0x90;
        narrow = "invalid UTF-8 (overlong encoding)";
    } else if (b0 == 0xF4) {
        hi = 0x8F;
        narrow = "invalid UTF-8 (code point above U+10FFFF)";
    }
    if (n < 2) {
        return "invalid UTF-8 (truncated sequence)";
    }
    if (p[1] < 0x80 || p[1] > 0xBF) {
        return "invalid UTF-8 (truncated sequence)";
    }
    if (p[1] < lo || p[1] > hi) {
        return narrow;
    }
    for (size_t i = 2; i < need; ++i) {
        if (i >= n || p[i] < 0x80 || p[i] > 0xBF) {
            return "invalid UTF-8 (truncated sequence)";
        }
    }
    switch (need) {
        case 2: cp = (uint32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F); break;
        case 3: cp = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F); break;
        default:
            cp = (uint32_t(b0 & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) | (uint32_t(p[2] & 0x3F) << 6) |
                 (p[3] & 0x3F);
    }
    length = need;
    return nullptr;
}

void
append(std::string& out, uint32_t cp)
{
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

} // namespace ortops::utf8
