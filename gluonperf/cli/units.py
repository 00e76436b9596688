"""Argparse types for quantities given with a unit (memory sizes such as 2G), for the
commands and the benchmarks' command lines."""
import argparse


def size_bytes(text):
    """'2G', '2GiB', '512M', '1.5g', '3000000' -> bytes (K, M, G, T: powers of 1024)."""
    import re
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*$", text)
    if not m:
        raise argparse.ArgumentTypeError("%r is not a size; use e.g. 2G, 512M or 2GiB" % text)
    value = float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " ")
    if value < 1:
        raise argparse.ArgumentTypeError("%r is not a positive size" % text)
    return int(value)
