"""Loki's per-entry limits for OTLP records: :mod:`obs._lokifit` (which the JSON lines
use too, so it lives outside the OTel package); kept under this name for importers."""

from __future__ import annotations

from obs._lokifit import (
    FOLDED,
    FOLDED_FIELDS,
    MAX_BYTES,
    MAX_ENTRIES,
    PROTECTED,
    Room,
    cost,
    fit,
    fits,
    label_name,
    room,
)

__all__ = [
    "FOLDED",
    "FOLDED_FIELDS",
    "MAX_BYTES",
    "MAX_ENTRIES",
    "PROTECTED",
    "Room",
    "cost",
    "fit",
    "fits",
    "label_name",
    "room",
]
