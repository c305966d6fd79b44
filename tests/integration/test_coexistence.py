"""obs beside an application's own logging set-up (issue 13): never doubled, never muted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

APP = """
import logging, obs, obs.testing
logging.basicConfig(level=logging.DEBUG, format="PLAIN %(levelname)s %(message)s")
obs.configure(format="json", sdk_disabled=True)
log = logging.getLogger("app")
log.debug("dbg %s", 1)
log.info("inf")
obs.get_logger("app").debug("obs_dbg")
obs.testing.reset()
log.info("after_reset")
"""


def run(env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    return subprocess.run(
        [sys.executable, "-c", APP],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
    )


class TestBasicConfig:
    def test_once_each_debug_kept_and_given_back(self) -> None:
        """After basicConfig(level=DEBUG): every stdlib line once, as obs JSON, DEBUG
        included (the first release printed each twice and reset root to INFO); obs'
        own logger follows the app's DEBUG; after reset the app's handler is back."""
        proc = run()
        assert 0 == proc.returncode, proc.stderr
        lines = proc.stderr.splitlines()
        plain = [line for line in lines if line.startswith("PLAIN")]
        records = [json.loads(line) for line in lines if line.startswith("{")]
        assert ["PLAIN INFO after_reset"] == plain, lines
        assert [("dbg %s", "dbg 1"), ("inf", "inf"), ("obs_dbg", "obs_dbg")] == [
            (r["event"], r["body"]) for r in records
        ]

    def test_obs_level_set_wins(self) -> None:
        """With OBS_LEVEL=INFO the operator's level applies to stdlib records too."""
        proc = run({"OBS_LEVEL": "INFO"})
        records = [json.loads(x) for x in proc.stderr.splitlines() if x.startswith("{")]
        assert ["inf"] == [r["event"] for r in records]
