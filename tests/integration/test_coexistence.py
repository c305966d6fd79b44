"""obs beside an application's own logging set-up (issue 13): never doubled, never muted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


INSTRUMENTED = """
import logging, sys
from opentelemetry._logs import set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

# What opentelemetry-instrument sets up: a global provider and its handler on root.
provider = LoggerProvider()
provider.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=sys.argv[1])))
set_logger_provider(provider)
logging.getLogger().addHandler(LoggingHandler(logger_provider=provider))
logging.getLogger().setLevel(logging.INFO)

import obs
obs.configure(format="json", otlp_endpoint="http://127.0.0.1:9")
logging.getLogger("app").warning("stdlib_once")
obs.get_logger("app").warning("obs_once")
obs.shutdown()
provider.shutdown()
"""


class TestGlobalProvider:
    def test_each_record_exported_once_and_the_provider_named(self, otlp_receiver: Any) -> None:
        """Under an app's global LoggerProvider with the SDK's LoggingHandler on root, each
        stdlib record arrives once (twice on the first release), and obs says its own
        endpoint setting is not used (it was ignored silently)."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        proc = subprocess.run(
            [sys.executable, "-c", INSTRUMENTED, otlp_receiver.http_logs_url],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**base, "PYTHONPATH": str(ROOT)},
        )
        assert 0 == proc.returncode, proc.stderr
        otlp_receiver.wait_for(2, timeout=10)
        bodies = [r["body"] for r in otlp_receiver.records]
        assert 1 == bodies.count("stdlib_once"), otlp_receiver.records  # not also the SDK's
        assert 1 == len(otlp_receiver.by_event("obs_once"))
        notice = [json.loads(x) for x in proc.stderr.splitlines() if "obs_export_provider" in x]
        assert 1 == len(notice), proc.stderr
        assert ("WARNING", "global") == (notice[0]["severity_text"], notice[0]["provider"])
        assert (
            "OTEL_EXPORTER_OTLP_ENDPOINT" in notice[0]["body"]
            or "otlp_endpoint" in (notice[0]["body"])
        )


ROTATE = """
import os, signal, sys, obs
path = sys.argv[1]
seen = []
signal.signal(signal.SIGHUP, lambda s, f: seen.append(s))  # the app's own handler
obs.configure(format="json", sdk_disabled=True, stream="none", file=path)
log = obs.get_logger("app")
log.warning("before_rotation")
os.rename(path, path + ".1")  # logrotate's default (create): rename, then signal
os.kill(os.getpid(), signal.SIGHUP)
log.warning("after_rotation")  # at once: the 1 s inode check has not run yet
obs.shutdown()
print("previous handler ran" if seen else "previous handler lost")
"""


class TestRotation:
    def test_sighup_reopens_obs_file_and_chains(self, tmp_path: Path) -> None:
        """OBS_FILE_REOPEN_ON_SIGHUP=true: after logrotate's rename and SIGHUP the next line
        goes to the new file, and the app's own SIGHUP handler still runs."""
        path = tmp_path / "app.jsonl"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        proc = subprocess.run(
            [sys.executable, "-c", ROTATE, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**base, "PYTHONPATH": str(ROOT), "OBS_FILE_REOPEN_ON_SIGHUP": "true"},
        )
        assert (0, "previous handler ran\n") == (proc.returncode, proc.stdout), proc.stderr
        rotated = [json.loads(x)["event"] for x in Path(f"{path}.1").read_text().splitlines()]
        current = [json.loads(x)["event"] for x in path.read_text().splitlines()]
        assert (["before_rotation"], ["after_rotation"]) == (rotated, current)
        assert 0o600 == path.stat().st_mode & 0o777
