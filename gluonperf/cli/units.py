"""Argparse types for quantities given with a unit (memory sizes such as 2G), for the
commands and the benchmarks' command lines."""
import argparse
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
