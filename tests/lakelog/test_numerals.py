"""Which text counts as an integer: what the route, CLI and option parsers rely on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog.numerals import is_signed_int, is_unsigned_int


@pytest.mark.parametrize("text", ["0", "7", "0042", "123456789012345678901234567890"])
def test_ascii_digits_are_unsigned_ints(text: str) -> None:
    assert is_unsigned_int(text)
    assert is_signed_int(text)
    assert is_signed_int("-" + text)


@pytest.mark.parametrize(
    "text", ["", "-", "-1", "+1", " 1", "1 ", "1.0", "1e3", "³", "¹²", "٣", "\uff11"]
)
def test_anything_else_is_not_an_unsigned_int(text: str) -> None:
    assert not is_unsigned_int(text)


@pytest.mark.parametrize("text", ["", "-", "--1", "+1", "-³", "-٣", "1-"])
def test_signed_ints_allow_only_one_leading_minus(text: str) -> None:
    assert not is_signed_int(text)


@given(st.text(max_size=8))
def test_accepted_text_always_parses(text: str) -> None:
    # The point of the module: accepted text never makes int() raise, and means what its
    # ASCII bytes mean.
    if is_signed_int(text):
        assert int(text) == int(text.encode("ascii"))
