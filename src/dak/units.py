"""Parsing and formatting of sizes, ratios, times and bandwidths.

Sizes are integers in bytes.  Decimal units (KB, MB, GB, TB) are powers of
1000; binary units (KiB, MiB, GiB, TiB) and the bare letters K, M, G, T are
powers of 1024 (so "40G" == 40 GiB).  A bare number is a byte count.
Ratios are fractions in [0, 1], given as "0.05" or "5%".
"""

from __future__ import annotations

import math
import re

_UNITS = {
    "": 1, "B": 1,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
    "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
_SIZE_HELP = "use a number with a unit such as 40GiB, 512MB or 1.5TiB (a bare integer is bytes)"

KIB, MIB, GIB, TIB = 2**10, 2**20, 2**30, 2**40


def parse_size(text: str | int | float) -> int:
    """Parse a size like "40GiB", "40GB", "512MiB", "1.5TiB", "40G" or "1024" into bytes.

    Returns an int (rounded to the nearest byte).  Raises ValueError naming the
    accepted forms when the string cannot be parsed or is negative.
    """
    if isinstance(text, bool):
        raise ValueError(f"cannot parse size {text!r}: {_SIZE_HELP}")
    if isinstance(text, (int, float)):
        if not math.isfinite(text) or text < 0:
            raise ValueError(f"cannot parse size {text!r}: must be a non-negative number of bytes")
        if text != int(text):
            raise ValueError(f"cannot parse size {text!r}: a number is a count of bytes and must be whole "
                             f"(for {text} GiB give the string '{text}GiB')")
        return int(text)
    m = _SIZE_RE.match(str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"cannot parse size {text!r}: {_SIZE_HELP}")
    number, unit = m.group(1), m.group(2).upper()
    if unit in ("", "B") and not re.fullmatch(r"[0-9]+", number):
        raise ValueError(f"cannot parse size {text!r}: a size without a unit must be a whole number of bytes; {_SIZE_HELP}")
    value = float(number) * _UNITS[unit]
    if not math.isfinite(value):
        raise ValueError(f"cannot parse size {text!r}: {_SIZE_HELP}")
    return int(round(value))


def parse_ratio(text: str | float) -> float:
    """Parse a fraction in [0, 1] given as "0.05" or "5%"."""
    help_ = "use a fraction in [0, 1] such as 0.05 or a percentage such as 5%"
    if isinstance(text, bool):
        raise ValueError(f"cannot parse ratio {text!r}: {help_}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        s = str(text).strip()
        try:
            value = float(s[:-1]) / 100.0 if s.endswith("%") else float(s)
        except ValueError:
            raise ValueError(f"cannot parse ratio {text!r}: {help_}") from None
    if not (0.0 <= value <= 1.0):
        raise ValueError(f"cannot parse ratio {text!r}: {help_}")
    return value


def format_bytes(n: float) -> str:
    """Format a byte count with binary units, e.g. 1.50 GiB."""
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, scale in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale:
            return f"{sign}{n / scale:.2f} {unit}"
    return f"{sign}{n:.0f} B"


def format_time(seconds: float) -> str:
    """Format a duration in seconds as s, ms or us."""
    if seconds == math.inf:
        return "inf"
    if abs(seconds) >= 1.0:
        return f"{seconds:.3f} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.2f} us"


def format_bandwidth(bytes_per_s: float) -> str:
    """Format a bandwidth in bytes/s with decimal units (GB/s, TB/s)."""
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6)):
        if abs(bytes_per_s) >= scale:
            return f"{bytes_per_s / scale:.2f} {unit}"
    return f"{bytes_per_s:.0f} B/s"
