"""No JSON line is lost when logrotate rotates ``OBS_FILE`` under the collector.

docs/OPERATIONS.md recommends logrotate's ``create`` (rename) mode: obs notices the rename
within a second and reopens the path, so up to a second of lines still goes to the renamed
file. The collector's filelog receiver (modelled in ``tests/_fileconsumer.py`` from
upstream, with ``examples/otel-collector.yaml``'s own settings) reads a file renamed out of
its ``include`` pattern to its end once, at the next poll, and never again: the lines obs
writes there after that poll (a workspace_terminal_failure among them) would never reach
Loki. The kit's pattern keeps rotated names matched, so the receiver follows the file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from _fileconsumer import FileConsumer
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ops_kit import COLLECTOR, load_yaml

import obs
import obs._output
from obs._output import _REOPEN_CHECK_SECONDS


def receiver_in(directory: Path) -> dict[str, Any]:
    """The kit's filelog receiver with its /var/log/obs paths moved to ``directory``."""
    receiver = dict(load_yaml(COLLECTOR)["receivers"]["filelog"])
    for key in ("include", "exclude"):
        receiver[key] = [p.replace("/var/log/obs", str(directory)) for p in receiver.get(key) or []]
    return receiver


def logrotate_create(path: Path, rotated_name: str) -> None:
    """logrotate's default mode: rename the file, create an empty one in its place."""
    os.rename(path, path.with_name(rotated_name))
    path.touch(mode=0o600)


def events(lines: list[str]) -> list[str]:
    return [json.loads(line)["event"] for line in lines]


#: logrotate's names for a rotated file: numbered, dateext, and the next cycle's rename.
ROTATED_NAMES = ("vllm-rank3.jsonl.1", "vllm-rank3.jsonl-20261204")


class _HeldClock:
    """``obs._output``'s clock: stopped (no reopen check comes due, however slowly a loaded
    machine runs the steps before), then moved past the check window and running on."""

    def __init__(self) -> None:
        self._at: float | None = time.monotonic()
        self._ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self._ahead if self._at is None else self._at

    def run_past_the_check_window(self) -> None:
        assert self._at is not None
        self._ahead = self._at + _REOPEN_CHECK_SECONDS - time.monotonic()
        self._at = None

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.mark.parametrize("rotated_name", ROTATED_NAMES)
def test_lines_obs_writes_to_the_renamed_file_are_read(tmp_path, rotated_name, monkeypatch):
    """Rename between two polls; obs writes the terminal failure into the renamed file
    (it has not noticed yet), then reopens: the collector reads every line once. obs'
    clock stands still until the check window is over: with the real one, a loaded CI
    machine took the window before the terminal failure was written (it went to the new
    file, and the renamed-file path went untested)."""
    clock = _HeldClock()
    monkeypatch.setattr(obs._output, "time", clock)
    path = tmp_path / "vllm-rank3.jsonl"
    obs.configure(file=str(path))
    consumer = FileConsumer(receiver_in(tmp_path))
    try:
        log = obs.get_logger("rotation")
        log.info("before_rotation")
        read = consumer.poll()
        logrotate_create(path, rotated_name)
        read += consumer.poll()  # the collector polls (200 ms) before obs' next check
        log.error("workspace_terminal_failure")  # still the old descriptor: renamed file
        clock.run_past_the_check_window()
        log.info("after_reopen")  # obs noticed the rename: the new file
        read += consumer.poll()
        read += consumer.poll()
    finally:
        consumer.close()
    rotated = (tmp_path / rotated_name).read_text().splitlines()
    assert events(rotated) == ["before_rotation", "workspace_terminal_failure"]
    # Once each; within one poll the receiver reads its files in no set order.
    assert sorted(events(read)) == ["after_reopen", "before_rotation", "workspace_terminal_failure"]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.sampled_from(["write", "write_old", "rotate", "poll", "compress"]),
        min_size=1,
        max_size=25,
    )
)
def test_any_rotation_schedule_loses_no_line(tmp_path_factory, steps):
    """Writes (to the path, or to the descriptor of the file before the last rename, as
    obs within its check window), logrotate renames (numbered, shifting older ones, with
    delaycompress), and polls in any order: every line is read, once."""
    directory = tmp_path_factory.mktemp("rotation")
    path = directory / "app.jsonl"
    path.touch()
    consumer = FileConsumer(receiver_in(directory))
    old: Any = None
    written, read = [], []
    try:
        for n, step in enumerate(steps):
            line = json.dumps({"event": f"e{n}", "pad": "x" * 40}) + "\n"
            if step == "write" or (step == "write_old" and old is None):
                with path.open("a") as f:
                    f.write(line)
                written.append(f"e{n}")
            elif step == "write_old":
                old.write(line.encode())
                old.flush()
                written.append(f"e{n}")
            elif step == "rotate":
                for i in range(8, 0, -1):  # .1 -> .2 ...; .2 and older are compressed
                    src = directory / f"app.jsonl.{i}"
                    if src.exists():
                        os.rename(src, directory / f"app.jsonl.{i + 1}")
                if old is not None:
                    old.close()
                old = path.open("ab")
                logrotate_create(path, "app.jsonl.1")
            elif step == "compress":  # delaycompress: files two rotations old, long read
                read += consumer.poll()
                for src in directory.glob("app.jsonl.[2-9]"):
                    src.with_name(src.name + ".gz").write_bytes(b"\x1f\x8b gzip")
                    src.unlink()
            else:
                read += consumer.poll()
        if old is not None:
            old.close()
            old = None
        read += consumer.poll()
        read += consumer.poll()
    finally:
        if old is not None:
            old.close()
        consumer.close()
    assert sorted(events(read)) == sorted(written)
