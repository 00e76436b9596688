"""Argparse types for quantities given with a unit (memory sizes such as 2G, durations such as
50ms), for the commands and the benchmarks' command lines."""
import argparse
import math
import re

UNITS = "KMGT"  # powers of 1024


def size_value(text, units=UNITS):
    """'512M', '512MiB', '1.5k', '3000' -> bytes as a float: a number with an optional unit of
    `units` (either case, then an optional B or iB; a plain number is bytes), or None when
    `text` is not such a size."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([%s]?)(?:i?[bB])?\s*$" % (units + units.lower()), text)
    if not m:
        return None
    return float(m.group(1)) * 1024 ** (" " + UNITS.lower()).index(m.group(2).lower() or " ")


def size_bytes(text):
    """'2G', '2GiB', '512M', '1.5g', '3000000' -> bytes (K, M, G, T: powers of 1024)."""
    value = size_value(text)
    if value is None:
        raise argparse.ArgumentTypeError("%r is not a size; use e.g. 2G, 512M or 2GiB" % text)
    if value < 1:
        raise argparse.ArgumentTypeError("%r is not a positive size" % text)
    return int(value)


DURATION_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def duration_value(text):
    """'50ms', '0.05s', '200us', '0.05' (seconds) -> seconds as a float, or None when `text`
    is not such a duration."""
    m = re.match(r"^\s*(\d*\.?\d+(?:[eE]-?\d+)?)\s*(s|ms|us)?\s*$", text, re.IGNORECASE)
    if not m:
        return None
    value = float(m.group(1)) * DURATION_UNITS[(m.group(2) or "s").lower()]
    return value if math.isfinite(value) else None


def _duration(text, zero):
    value = duration_value(text)
    if value is None:
        raise argparse.ArgumentTypeError("%r is not a duration; use e.g. 50ms, 0.05s or 200us" % text)
    if value < 0 or value == 0 and not zero:
        raise argparse.ArgumentTypeError("%r must be above 0" % text)
    return value


def duration_seconds(text):
    """'50ms' -> 0.05: a duration above 0 (s, ms or us; a plain number is seconds)."""
    return _duration(text, zero=False)


def duration_or_zero(text):
    """As `duration_seconds`, 0 included (a setting that 0 turns off)."""
    return _duration(text, zero=True)
