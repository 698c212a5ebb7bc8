"""The engine's latency histogram in Python: the same HdrHistogram (1 µs to one hour, 3
significant digits), the same percentiles, min, max and mean, and the same V2 bytes, so a
run whose requests were not sent by the engine (a locustfile's) has the summary and
`histograms.json` an engine run has.

It follows the Rust `hdrhistogram` crate the engine uses (`new_with_bounds(1,
3_600_000_000, 3)`, `value_at_quantile`, `mean`, `V2Serializer`): tests compare both on
the same records, byte for byte.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from functools import cache

import numpy as np

LOWEST_US = 1
HIGHEST_US = 3_600_000_000
SIGNIFICANT_DIGITS = 3
# The percentiles the engine reports, and how it names them (`p50`, `p99.9`).
PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9, 99.99)

# The V2 cookie with the word size bits the Rust crate (and Java's) sets.
V2_COOKIE = 0x1C849303 | 0x10
_HEADER = struct.Struct(">IIIIqqd")

# With a lowest value of 1 and 3 digits: 2048 sub-buckets, no unit shift.
_SUB_BUCKET_COUNT = 1 << math.ceil(math.log2(2 * 10**SIGNIFICANT_DIGITS))
_HALF = _SUB_BUCKET_COUNT // 2
_HALF_MAGNITUDE = _HALF.bit_length() - 1
_SUB_BUCKET_MASK = _SUB_BUCKET_COUNT - 1


def _bucket_count() -> int:
    untrackable, buckets = _SUB_BUCKET_COUNT, 1
    while untrackable <= HIGHEST_US:
        untrackable <<= 1
        buckets += 1
    return buckets


COUNTS_LEN = (_bucket_count() + 1) * _HALF


def _bucket(values: np.ndarray) -> np.ndarray:
    """The bucket of each value: how many powers of two it is above bucket 0's range."""
    _, exponent = np.frexp((values | _SUB_BUCKET_MASK).astype(np.float64))
    return exponent.astype(np.int64) - _SUB_BUCKET_COUNT.bit_length() + 1


def index_for(values: np.ndarray) -> np.ndarray:
    """The counts index of each value (int64 microseconds within range)."""
    bucket = _bucket(values)
    return ((bucket + 1) << _HALF_MAGNITUDE) + (values >> bucket) - _HALF


def _value_for(index: int) -> int:
    bucket = (index >> _HALF_MAGNITUDE) - 1
    sub = (index & (_HALF - 1)) + _HALF
    if bucket < 0:
        sub -= _HALF
        bucket = 0
    return sub << bucket


@cache
def _midpoints() -> np.ndarray:
    """The middle of each index's range of values, as float64 (read-only)."""
    index = np.arange(COUNTS_LEN, dtype=np.int64)
    bucket = (index >> _HALF_MAGNITUDE) - 1
    sub = (index & (_HALF - 1)) + _HALF
    sub = np.where(bucket < 0, sub - _HALF, sub)
    values = sub << np.maximum(bucket, 0)
    size = np.left_shift(1, _bucket(values))
    low = (values // size) * size
    out = (low + (size >> 1)).astype(np.float64)
    out.flags.writeable = False
    return out


def _range(value: int) -> tuple[int, int]:
    """The lowest value equivalent to `value` and the size of their range."""
    bucket = int(_bucket(np.array([value], dtype=np.int64))[0])
    return (value >> bucket) << bucket, 1 << bucket


def highest_equivalent(value: int) -> int:
    low, size = _range(value)
    return low + size - 1


@dataclass
class Histogram:
    """Counts of latencies in microseconds, as the engine's histograms keep them."""

    counts: np.ndarray
    total: int
    min_value: int
    max_value: int

    @classmethod
    def of(cls, latencies_us: np.ndarray) -> Histogram:
        """The histogram of these latencies, clamped into 1 µs .. one hour as the engine does."""
        values = np.clip(np.asarray(latencies_us, dtype=np.int64), LOWEST_US, HIGHEST_US)
        counts = np.bincount(index_for(values), minlength=COUNTS_LEN).astype(np.int64)
        if values.size == 0:
            return cls(counts, 0, 0, 0)
        return cls(counts, int(values.size), int(values.min()), int(values.max()))

    @classmethod
    def of_counts(cls, counts: np.ndarray) -> Histogram:
        """The histogram of these bucket counts (as decode_v2 gives them, or their sum)."""
        filled = np.flatnonzero(counts)
        if filled.size == 0:
            return cls(counts, 0, 0, 0)
        low, high = _value_for(int(filled[0])), _value_for(int(filled[-1]))
        return cls(counts, int(counts.sum()), low, high)

    def value_at_quantile(self, quantile: float) -> int:
        wanted = max(math.ceil(min(quantile, 1.0) * float(self.total)), 1)
        cumulative = np.cumsum(self.counts)
        index = int(np.searchsorted(cumulative, wanted, side="left"))
        if index >= COUNTS_LEN:
            return 0
        value = _value_for(index)
        return _range(value)[0] if quantile == 0.0 else highest_equivalent(value)

    def mean(self) -> float:
        if self.total == 0:
            return 0.0
        filled = np.flatnonzero(self.counts)
        terms = _midpoints()[filled] * self.counts[filled].astype(np.float64) / float(self.total)
        # Added one by one in index order (cumsum), as the engine's mean adds them.
        return float(np.cumsum(terms)[-1])

    def latency_items(self) -> dict:
        """`percentiles_us`, `min_us`, `max_us`, `mean_us` (none of these three when empty)
        and `hdr_v2`, as the engine's summary has them."""
        out: dict = {"percentiles_us": {}}
        if self.total:
            out["percentiles_us"] = {
                f"p{q:g}": self.value_at_quantile(q / 100.0) for q in PERCENTILES
            }
            out["min_us"] = _range(self.min_value)[0]
            out["max_us"] = highest_equivalent(self.max_value)
            out["mean_us"] = self.mean()
        out["hdr_v2"] = self.v2()
        return out

    def v2(self) -> bytes:
        """The V2 encoding (uncompressed), as the Rust crate's V2Serializer writes it."""
        top = highest_equivalent(self.max_value) if self.total else 0
        limit = int(index_for(np.array([top], dtype=np.int64))[0])
        payload = bytearray()
        counts = self.counts
        index = 0
        while index <= limit:
            count = int(counts[index])
            index += 1
            zeros = 0
            if count == 0:
                zeros = 1
                while index <= limit and counts[index] == 0:
                    zeros += 1
                    index += 1
            _varint(_zig_zag(-zeros if zeros > 1 else count), payload)
        header = _HEADER.pack(
            V2_COOKIE, len(payload), 0, SIGNIFICANT_DIGITS, LOWEST_US, HIGHEST_US, 1.0
        )
        return header + bytes(payload)


def decode_v2(data: bytes) -> np.ndarray:
    """The counts of a V2 histogram of the engine's layout (for checks and tests)."""
    cookie, length, _, digits, lowest, highest, _ = _HEADER.unpack_from(data)
    if (cookie, digits, lowest, highest) != (V2_COOKIE, SIGNIFICANT_DIGITS, 1, HIGHEST_US):
        raise ValueError("not a V2 histogram of 1 µs to one hour at 3 digits")
    counts = np.zeros(COUNTS_LEN, dtype=np.int64)
    at, end, index = _HEADER.size, _HEADER.size + length, 0
    while at < end:
        raw, at = _read_varint(data, at)
        value = (raw >> 1) ^ -(raw & 1)
        if value < 0:
            index += -value
        else:
            counts[index] = value
            index += 1
    return counts


def _zig_zag(value: int) -> int:
    return ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF


def _varint(value: int, out: bytearray) -> None:
    """LEB128 of up to 9 bytes, the ninth holding 8 bits (HdrHistogram's ZigZag encoding)."""
    for _ in range(8):
        if value >> 7 == 0:
            out.append(value)
            return
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value & 0xFF)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for n in range(8):
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << (7 * n)
        if byte & 0x80 == 0:
            return value, at
    return value | (data[at] << 56), at + 1
