"""Keys that test the name rules: shared by the field, redaction, chain and fused tests."""

from __future__ import annotations


class OddKey(str):
    """A str subclass key with its own hash and equality (equal to nothing but itself)."""

    __slots__ = ()

    def __hash__(self) -> int:
        return 12345

    def __eq__(self, other: object) -> bool:
        return self is other
