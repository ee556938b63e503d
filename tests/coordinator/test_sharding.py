"""The shard of a group is Kafka's partitionFor: abs-by-mask of Java's String.hashCode modulo the count."""

from __future__ import annotations

import pytest

from coordinator.core.sharding import java_string_hashcode, shard_of


@pytest.mark.parametrize(
    ("text", "hashcode"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),  # the JDK documentation's worked example
        ("polygenelubricants", -(2**31)),  # famously Integer.MIN_VALUE
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # hashed as its two UTF-16 surrogates
        ("\u00e9", 0xE9),
    ],
)
def test_java_string_hashcode(text: str, hashcode: int) -> None:
    assert java_string_hashcode(text) == hashcode


def test_shard_masks_the_sign_bit_like_kafka_utils_abs() -> None:
    # Math.abs(Integer.MIN_VALUE) stays negative; Kafka's Utils.abs masks it to 0.
    assert shard_of("polygenelubricants", 50) == 0
    assert java_string_hashcode("hello world") == 1794106052
    assert shard_of("hello world", 50) == 1794106052 % 50 == 2
    # A negative hash: -1322913907 & 0x7fffffff == 824569741, and 824569741 % 50 == 41.
    assert java_string_hashcode("my-consumer-group-1") == -1322913907
    assert shard_of("my-consumer-group-1", 50) == 41


def test_every_shard_is_in_range() -> None:
    for n in (1, 7, 50):
        assert {shard_of(f"group-{i}", n) for i in range(2000)} == set(range(n))
