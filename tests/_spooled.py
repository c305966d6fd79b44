"""One spooled record as the spool stores it (a v1 line unless ``v`` says otherwise)."""

from __future__ import annotations

import time
from typing import Any


def spooled_doc(i: int, service: str = "trainer", v: object = 1) -> dict[str, Any]:
    """An ERROR record ``spooled {i}`` of ``service``, format version ``v``."""
    now = time.time_ns()
    return {
        "v": v,
        "cls": 3,
        "ts": now,
        "ots": now,
        "sn": 17,
        "st": "ERROR",
        "body": f"spooled {i}",
        "name": "spooled_error",
        "attrs": {"i": i},
        "res": {"service.name": service, "host.name": "node-7", "rank": 2},
    }
