"""The JSON lines a log call writes, through the real chain into ``OBS_FILE``."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

import obs
import obs.testing


def written(call: Callable[[Any], object]) -> list[dict[str, Any]]:
    """The JSON lines ``call(log)`` writes (``obs.get_logger("app")``, JSON to a file, no
    export; obs reset afterwards)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        obs.configure(format="json", sdk_disabled=True, file=path, stream="none")
        try:
            call(obs.get_logger("app"))
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                return [json.loads(line) for line in fh if line.strip()]
        finally:
            obs.testing.reset()
