"""Logging from a finaliser the interpreter runs as it clears the modules (imports fail
then): the record is written whole, with its rank and host, on every route, never as
obs' last-resort record."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = """
import logging, sys
import obs, obs.stdlib
obs.configure(format="json", sdk_disabled=True, file=sys.argv[1])

class Late:
    def __init__(self, route):
        self.route, self.log = route, obs.get_logger("app")
        self.std = logging.getLogger("lib")

    def __del__(self):
        if self.route == "error":
            self.log.error("workspace_terminal_failure", chain=self.route)
        elif self.route == "debug":
            self.log.debug("workspace_terminal_failure", chain=self.route)
        elif self.route == "stdlib":
            self.std.error("workspace_terminal_failure", extra={"chain": self.route})
        elif self.route == "exception":
            try:
                raise RuntimeError("late")
            except RuntimeError:
                self.log.exception("workspace_terminal_failure", chain=self.route)

# held by a module global: finalised when the interpreter clears the modules
KEPT = [Late(route) for route in ("error", "debug", "stdlib", "exception")]
"""


def test_first_records_at_interpreter_shutdown_are_whole(tmp_path: Path) -> None:
    """The first records of a process, logged by finalisers at interpreter shutdown, fell
    back to obs' minimal record (``rank: -1``, no ``host.name``, an ``obs_internal_error``:
    ``import socket`` failed with ``sys.meta_path is None``; failed before this). Each is
    now written with its rank and host, and nothing else is."""
    (tmp_path / "c.py").write_text(textwrap.dedent(CHILD))
    out = tmp_path / "f.jsonl"
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "c.py"), str(out)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(x.get("chain") for x in lines) == ["debug", "error", "exception", "stdlib"]
    for x in lines:
        assert (x["event"], x["stage"], x["severity_text"]) == (
            "workspace_terminal_failure",
            "terminal_failure",
            "ERROR",
        ), x
        assert (x["rank"], x["host.name"]) == (0, socket.gethostname()), x
        assert "obs_internal_error" not in x
