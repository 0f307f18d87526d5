// The JSON reader's numbers (json_number.hpp).
#include "config/json_number.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <system_error>

namespace ortops::json::detail {

namespace {

class NumberReader
{
  public:
    NumberReader(const unsigned char* p, size_t n, size_t& i)
      : p_(p)
      , n_(n)
      , i_(i)
    {
    }

    // A number, RFC 8259's  -? int frac? exp?  : its parts scanned in turn (each refusing what
    // JSON does not allow there), then its value read exactly: an int64 when it has neither
    // fraction nor exponent, else a double.
    Value run()
    {
        NumberText t;
        t.start = i_;
        t.negative = sign();
        integerPart(t);
        fractionPart(t);
        exponentPart(t);
        t.end = i_;
        return t.integer ? Value::fromInteger(exactInteger(t)) : Value::fromNumber(nearestDouble(t));
    }

  private:
    // Where a number's parts are in the input, and what its digits say.
    struct NumberText
    {
        size_t start = 0, intEnd = 0, end = 0;   // [start, intEnd): sign and integer part
        bool negative = false;
        bool integer = true;          // no fraction, no exponent
        bool zeroMantissa = true;     // every digit before the exponent is 0
    };

    std::string shown(const NumberText& t) const
    {
        return std::string(reinterpret_cast<const char*>(p_ + t.start), t.end - t.start).substr(0, 40);
    }

    bool digitAt(size_t k) const { return k < n_ && p_[k] >= '0' && p_[k] <= '9'; }

    // An optional '-', which must be followed by a digit ('+' is refused by value()).
    bool sign()
    {
        size_t start = i_;
        bool negative = p_[i_] == '-';
        if (negative) {
            ++i_;
        }
        if (!digitAt(i_)) {
            fail("'-' not followed by a digit", start);
        }
        return negative;
    }

    // "0" or a digit 1-9 and more digits: no leading zero.
    void integerPart(NumberText& t)
    {
        if (p_[i_] == '0') {
            ++i_;
            if (digitAt(i_)) {
                fail("number with a leading zero", t.start);
            }
        } else {
            while (digitAt(i_)) {
                t.zeroMantissa = false;
                ++i_;
            }
        }
        t.intEnd = i_;
    }

    // '.' and at least one digit ("5." is refused).
    void fractionPart(NumberText& t)
    {
        if (i_ >= n_ || p_[i_] != '.') {
            return;
        }
        t.integer = false;
        ++i_;
        if (!digitAt(i_)) {
            fail("'.' not followed by a digit", i_ - 1);
        }
        while (digitAt(i_)) {
            if (p_[i_] != '0') {
                t.zeroMantissa = false;
            }
            ++i_;
        }
    }

    // 'e' or 'E', an optional sign and at least one digit.
    void exponentPart(NumberText& t)
    {
        if (i_ >= n_ || (p_[i_] != 'e' && p_[i_] != 'E')) {
            return;
        }
        t.integer = false;
        ++i_;
        if (i_ < n_ && (p_[i_] == '+' || p_[i_] == '-')) {
            ++i_;
        }
        if (!digitAt(i_)) {
            fail("exponent without digits", t.start);
        }
        while (digitAt(i_)) {
            ++i_;
        }
    }

    // The integer's exact value, refused outside int64: |value| <= 2^63 (negative) or
    // 2^63 - 1, accumulated without overflow.
    int64_t exactInteger(const NumberText& t)
    {
        uint64_t limit = t.negative ? (uint64_t(1) << 63) : (uint64_t(1) << 63) - 1;
        uint64_t magnitude = 0;
        for (size_t k = t.start + (t.negative ? 1 : 0); k < t.intEnd; ++k) {
            uint64_t d = p_[k] - '0';
            if (magnitude > (limit - d) / 10) {
                fail("integer " + shown(t) + " is outside int64", t.start);
            }
            magnitude = magnitude * 10 + d;
        }
        if (!t.negative) {
            return static_cast<int64_t>(magnitude);
        }
        return magnitude == (uint64_t(1) << 63) ? INT64_MIN : -static_cast<int64_t>(magnitude);
    }

    // The double nearest to the number, refused when it overflows or underflows to zero
    // although some digit is not 0.
    double nearestDouble(const NumberText& t)
    {
        const char* first = reinterpret_cast<const char*>(p_ + t.start);
        const char* last = reinterpret_cast<const char*>(p_ + t.end);
        double d = 0.0;
        auto [ptr, ec] = std::from_chars(first, last, d, std::chars_format::general);
        if (ec == std::errc::result_out_of_range) {
            // libstdc++ says so for a result that would be infinite or zero (denormals are
            // stored): tell the two apart by the decimal magnitude of the number.
            if (t.zeroMantissa) {
                return t.negative ? -0.0 : 0.0;
            }
            fail("number " + shown(t) + (decimalMagnitude(t) > 0 ? " overflows a double" : " underflows to zero"),
                 t.start);
        }
        if (ec != std::errc() || ptr != last) {
            fail("malformed number", t.start);
        }
        if (!std::isfinite(d)) {
            fail("number " + shown(t) + " overflows a double", t.start);
        }
        if (d == 0.0 && !t.zeroMantissa) {
            fail("number " + shown(t) + " underflows to zero", t.start);
        }
        return d;
    }

    // m such that the (valid, non-zero) number t is 0.d... * 10^m, saturated to +-10^6 (only
    // its sign is used).
    long decimalMagnitude(const NumberText& t) const
    {
        size_t k = t.start + (p_[t.start] == '-' ? 1 : 0);
        long m = p_[k] != '0' ? static_cast<long>(t.intEnd - k) : 0;
        k = t.intEnd;
        if (k < t.end && p_[k] == '.') {
            ++k;
            if (m == 0) {
                while (k < t.end && p_[k] == '0') {
                    --m;
                    ++k;
                }
            }
            while (digitAt(k) && k < t.end) {
                ++k;
            }
        }
        if (k < t.end && (p_[k] == 'e' || p_[k] == 'E')) {
            ++k;
            bool neg = false;
            if (p_[k] == '+' || p_[k] == '-') {
                neg = p_[k] == '-';
                ++k;
            }
            long e = 0;
            for (; k < t.end; ++k) {
                if (e < 1000000) {
                    e = e * 10 + (p_[k] - '0');
                }
            }
            m += neg ? -e : e;
        }
        return m;
    }

    [[noreturn]] static void fail(const std::string& message, size_t at) { throw Error(message, at); }

    const unsigned char* p_;
    size_t n_;
    size_t& i_;
};

} // namespace

Value
readNumber(const unsigned char* p, size_t n, size_t& i)
{
    return NumberReader(p, n, i).run();
}

} // namespace ortops::json::detail
