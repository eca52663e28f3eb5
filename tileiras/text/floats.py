"""Floating-point values as MLIR prints them.

MLIR prints a float attribute as ``%.6e``-like text when that text parses back
to the same bits, otherwise in LLVM APFloat's shortest "natural precision"
form, and as a hexadecimal bit pattern for NaN, infinities and values whose
natural form has no decimal point.  This module reimplements just enough of
APFloat (decode, round-to-nearest-even encode, ``toString``) to reproduce that
byte for byte for every Tile IR float type.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Optional

from ..record import record


@record(frozen=True)
class FloatFormat:
    """An IEEE-like binary format: field widths and which specials exist."""

    exp_bits: int
    man_bits: int  # stored fraction bits
    has_inf: bool = True
    nan_all_ones: bool = False  # NaN only when exponent and fraction are all ones (E4M3FN)
    no_nan: bool = False         # no NaN encodings at all (E2M1FN)
    signed: bool = True
    no_zero: bool = False        # E8M0FNU: every pattern but 0xFF is a power of two

    @property
    def width(self) -> int:
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def precision(self) -> int:
        """APFloat's precision: significand bits including the implicit one."""
        return self.man_bits + 1


FORMATS: dict[str, FloatFormat] = {
    "f16": FloatFormat(5, 10),
    "bf16": FloatFormat(8, 7),
    "f32": FloatFormat(8, 23),
    "tf32": FloatFormat(8, 10),
    "f64": FloatFormat(11, 52),
    "f8E5M2": FloatFormat(5, 2),
    "f8E4M3FN": FloatFormat(4, 3, has_inf=False, nan_all_ones=True),
    "f4E2M1FN": FloatFormat(2, 1, has_inf=False, no_nan=True),
    "f8E8M0FNU": FloatFormat(8, 0, has_inf=False, signed=False, no_zero=True),
    # NVIDIA's UE5M3 scales: unsigned, bias 15, subnormals, NaN only 0xFF
    "fnv8E5M3FNU": FloatFormat(5, 3, has_inf=False, nan_all_ones=True, signed=False),
}


@record(frozen=True)
class Decoded:
    negative: bool
    kind: str  # "zero", "normal", "inf", "nan"
    value: Fraction = Fraction(0)


def decode(bits: int, fmt: FloatFormat) -> Decoded:
    sign = bool(fmt.signed and (bits >> (fmt.width - 1)) & 1)
    exp = (bits >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1)
    man = bits & ((1 << fmt.man_bits) - 1)
    exp_max = (1 << fmt.exp_bits) - 1
    if fmt.no_zero:
        if exp == exp_max:
            return Decoded(False, "nan")
        return Decoded(False, "normal", Fraction(2) ** (exp - fmt.bias))
    if not fmt.no_nan:
        if fmt.nan_all_ones:
            if exp == exp_max and man == (1 << fmt.man_bits) - 1:
                return Decoded(sign, "nan")
        elif exp == exp_max:
            return Decoded(sign, "nan" if man else "inf")
    if exp == 0 and man == 0:
        return Decoded(sign, "zero")
    if exp == 0:
        value = Fraction(man, 1 << fmt.man_bits) * Fraction(2) ** (1 - fmt.bias)
    else:
        value = (1 + Fraction(man, 1 << fmt.man_bits)) * Fraction(2) ** (exp - fmt.bias)
    return Decoded(sign, "normal", -value if sign else value)


def _max_finite(fmt: FloatFormat) -> Fraction:
    exp_max = (1 << fmt.exp_bits) - 1
    if fmt.has_inf or (not fmt.nan_all_ones and not fmt.no_nan):
        top_exp, top_man = exp_max - 1, (1 << fmt.man_bits) - 1
    elif fmt.nan_all_ones:
        top_exp, top_man = exp_max, (1 << fmt.man_bits) - 2
    else:
        top_exp, top_man = exp_max, (1 << fmt.man_bits) - 1
    return (1 + Fraction(top_man, 1 << fmt.man_bits)) * Fraction(2) ** (top_exp - fmt.bias)


def encode(value: Fraction, negative: bool, fmt: FloatFormat) -> Optional[int]:
    """Round ``value`` (non-negative magnitude) to nearest-even; None on overflow
    to a value the format cannot hold (the caller then never compares equal)."""
    sign_bit = (int(negative) << (fmt.width - 1)) if fmt.signed else 0
    if value == 0:
        return sign_bit
    # scale so that the significand is an integer with man_bits fraction bits
    e = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** e > value:
        e -= 1
    e = max(e, 1 - fmt.bias)  # subnormal range shares the minimum exponent
    scaled = value / Fraction(2) ** (e - fmt.man_bits)
    q, r = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * r
    if twice > scaled.denominator or (twice == scaled.denominator and q & 1):
        q += 1
    if q >= (2 << fmt.man_bits):
        q >>= 1
        e += 1
    magnitude = Fraction(q) * Fraction(2) ** (e - fmt.man_bits)
    if magnitude > _max_finite(fmt):
        return None
    if q < (1 << fmt.man_bits):  # subnormal
        return sign_bit | q
    biased = e + fmt.bias
    return sign_bit | (biased << fmt.man_bits) | (q - (1 << fmt.man_bits))


def _adjust_digits(digits: str, exp: int, precision: int) -> tuple[str, int]:
    """APFloat's decimal AdjustToPrecision: ``digits`` most significant first."""
    n = len(digits)
    if n <= precision:
        return digits, exp
    first = n - precision  # count of dropped low digits
    low = digits[::-1]  # least significant first, as APFloat's buffer
    if low[first - 1] < "5":
        while first < n and low[first] == "0":
            first += 1
        return low[first:][::-1], exp + first
    buf = list(low)
    i = first
    while i < n:
        if buf[i] == "9":
            first += 1
            i += 1
        else:
            buf[i] = chr(ord(buf[i]) + 1)
            break
    if first == n:
        return "1", exp + first
    return "".join(buf[first:])[::-1], exp + first


def apfloat_to_string(dec: Decoded, fmt: FloatFormat, format_precision: int = 0,
                      max_padding: int = 3, truncate_zero: bool = True) -> str:
    """LLVM ``APFloat::toString`` for a finite value."""
    sign = "-" if dec.negative else ""
    if dec.kind == "zero":
        if max_padding:
            return sign + "0"
        if truncate_zero:
            return sign + "0.0E+0"
        return sign + "0." + "0" * max(format_precision, 1) + "e+00"
    magnitude = abs(dec.value)
    # value = significand * 2^exp with an integer significand of `precision` bits
    num, den = magnitude.numerator, magnitude.denominator
    exp2 = -(den.bit_length() - 1)
    significand = num
    while significand % 2 == 0:
        significand //= 2
        exp2 += 1
    if not format_precision:
        format_precision = 2 + fmt.precision * 59 // 196
    exp = 0
    if exp2 >= 0:
        significand <<= exp2
    else:
        significand *= 5 ** (-exp2)
        exp = exp2
    # APInt pre-truncation (may drop digits before rounding, as APFloat does)
    bits_required = (format_precision * 196 + 58) // 59
    bits = significand.bit_length()
    if bits > bits_required:
        removable = (bits - bits_required) * 59 // 196
        if removable:
            exp += removable
            significand //= 10 ** removable
    digits = str(significand)
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits, exp = _adjust_digits(stripped, exp, format_precision)
    n = len(digits)
    if not max_padding:
        scientific = True
    elif exp >= 0:
        scientific = exp > max_padding or n + exp > format_precision
    else:
        msd = exp + n - 1
        scientific = msd < 0 and -msd > max_padding
    if scientific:
        exp += n - 1
        text = digits[0] + "."
        if n == 1 and truncate_zero:
            text += "0"
        else:
            text += digits[1:]
        if not truncate_zero and format_precision > n - 1:
            text += "0" * (format_precision - n + 1)
        text += "E" if truncate_zero else "e"
        text += "+" if exp >= 0 else "-"
        exp_digits = str(abs(exp))
        if not truncate_zero and len(exp_digits) < 2:
            exp_digits = "0" + exp_digits
        return sign + text + exp_digits
    if exp >= 0:
        return sign + digits + "0" * exp
    whole = exp + n
    if whole > 0:
        return sign + digits[:whole] + "." + digits[whole:]
    return sign + "0." + "0" * (-whole) + digits


def parse_decimal(text: str) -> tuple[bool, Fraction]:
    negative = text.startswith("-")
    return negative, Fraction(text.lstrip("+-").replace("E", "e"))


def format_float(bits: int, type_name: str) -> str:
    """MLIR's ``printFloatValue`` for the raw bits of a ``type_name`` value."""
    fmt = FORMATS[type_name]
    dec = decode(bits, fmt)
    if dec.kind in ("zero", "normal"):
        text = apfloat_to_string(dec, fmt, 6, 0, False)
        negative, value = parse_decimal(text)
        if encode(value, negative, fmt) == bits:
            return text
        text = apfloat_to_string(dec, fmt)
        if "." in text:
            return text
    return "0x" + format(bits, "X")


def float_name_part(bits: int, type_name: str) -> Optional[str]:
    """The integer a constant's SSA name carries (``cst_2_f32``), if any:
    ``NaN`` for NaNs, the value when it converts exactly to a uint64."""
    dec = decode(bits, FORMATS[type_name])
    if dec.kind == "nan":
        return "NaN"
    if dec.kind == "zero":
        return None if dec.negative else "0"
    if dec.kind == "inf" or dec.value < 0 or dec.value.denominator != 1 or dec.value >= 1 << 64:
        return None
    return str(dec.value.numerator)
