"""The console format as a developer sees it: a child process writing to a real pty."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")

LOGS = """
import obs
obs.configure(sdk_disabled=True)
log = obs.get_logger("app")
log.info("a", k=1)
log.warning("workspace_initialized", k=2)
try:
    raise RuntimeError("boom")
except RuntimeError:
    log.warning("fallback_taken", exc_info=True)
    log.error("gave_up", exc_info=True)
"""

GETTER = """
import obs
obs.configure(sdk_disabled=True)
import torch
from comm import flashinfer_allreduce as fa
fa.get_fi_ar_workspace(1, 0, 1024, 4096, torch.bfloat16, None)
print("END", flush=True)
"""


def on_pty(code: str, **env: str) -> str:
    """Run ``code`` with stdout and stderr on a pty; what the terminal received."""
    primary, secondary = pty.openpty()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    base.pop("NO_COLOR", None)
    base.pop("FORCE_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
        env={**base, "PYTHONPATH": str(ROOT), **env},
        cwd=str(ROOT),
    )
    os.close(secondary)
    chunks = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=30)
    os.close(primary)
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


class TestConsoleOnATty:
    def test_colours_alignment_and_one_line_per_event(self) -> None:
        """On a tty: colours; pairs aligned; a WARNING with exc_info is one line, an ERROR
        gets its traceback (the first release printed every traceback)."""
        out = on_pty(LOGS)
        assert "\x1b[" in out
        plain = ANSI.sub("", out).splitlines()
        events = [line for line in plain if re.match(r"^\d{4}-", line)]
        assert 4 == len(events), plain
        assert 1 == len({line.index("k=") for line in events[:2]}), events
        after_warning = plain[plain.index(events[2]) + 1]
        assert after_warning == events[3], plain  # no traceback under the WARNING
        assert any(line.startswith("    Traceback") for line in plain), plain
        assert "app (" in events[0]
        assert "(<string>:" in events[0]

    def test_no_color_and_force_color(self) -> None:
        """NO_COLOR turns colours off on a tty; FORCE_COLOR turns them on off a tty."""
        assert "\x1b[" not in on_pty(LOGS, NO_COLOR="1")
        proc = subprocess.run(
            [sys.executable, "-c", LOGS],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "FORCE_COLOR": "1",
                "OBS_FORMAT": "console",
            },
        )
        assert "\x1b[" in proc.stderr

    def test_a_cpu_getter_call_reads_in_a_few_lines(self) -> None:
        """One getter call on a CPU (real flashinfer failure, two fallbacks) prints one line
        per event and one traceback for the terminal failure, not 53 lines."""
        out = ANSI.sub("", on_pty(GETTER))
        assert "END" in out
        lines = out[: out.index("END")].splitlines()
        events = [line for line in lines if re.match(r"^\d{4}-", line)]
        assert any("workspace_terminal_failure" in line for line in events), lines
        assert lines == events, "\n".join(lines)  # no 20-line traceback per fallback
        assert 4 <= len(events) <= 6, "\n".join(lines)
