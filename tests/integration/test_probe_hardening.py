"""The probe's promises at its edges, with real ranks: a rank's error text is scrubbed and
bounded on every output (report file, --json, screen, stderr); --world-size is capped;
an OS error while setting up the run (the run folder, the pipe, spawning the launcher)
is one line and the probe's failure status, not a traceback."""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import comm
from comm import probe
from comm.probe.launch import _base_env
from comm.probe.rank import error_line
from comm.probe.report import last_exception, scrub
from comm.probe.spec import EXIT_PROBE_FAILED, EXIT_USAGE, MAX_TIMEOUT_S, MAX_WORLD_SIZE

ROOT = Path(__file__).resolve().parents[2]

#: Loaded by the launcher (sitecustomize, through PYTHONPATH): every rank's process-group
#: join raises an exception whose message holds secrets and is 1 MB long, and writes the
#: same text to the rank's log as the last line of a traceback.
_RAISING_SITE = textwrap.dedent(
    """
    import os, sys

    if os.environ.get("PROBE_TEST_SECRET_ERROR"):
        import comm.probe.rank as _rank

        def _init_dist(spec, rank):
            text = (
                "connect failed: password=hunter2 Authorization: Bearer tok-SECRET-42 "
                "via https://alice:pw-SECRET-7@collector.example/v1 "
            ) + "x" * 1_000_000 + " api_key=TAIL-SECRET-9"
            sys.stderr.write("RuntimeError: " + text + "\\n")
            raise RuntimeError(text)

        _rank.init_dist = _init_dist
    """
)

_SECRETS = ("hunter2", "tok-SECRET-42", "pw-SECRET-7", "TAIL-SECRET-9")


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "OBS_", "COMM_")):
            monkeypatch.delenv(name)


@pytest.mark.integration
@pytest.mark.usefixtures("untraced_children")  # the launcher and ranks save no coverage data
def test_a_rank_error_with_secrets_is_scrubbed_and_bounded_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Real ranks whose process-group join raises a 1 MB message holding a password pair,
    a bearer token, a URL password and a trailing api_key: the rank report file, --json,
    the table and stderr carry none of them, and no line is longer than the bound. The
    report carried the whole message (``f"{type(exc).__name__}: {exc}"[:2000]``: the
    head's secrets unscrubbed), and the log-read cause was unscrubbed."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_RAISING_SITE)
    _clean_env(monkeypatch)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("PROBE_TEST_SECRET_ERROR", "1")
    outputs = []
    for shown in ("--json", "--verbose"):
        run = tmp_path / shown.strip("-")
        out = io.StringIO()
        code = probe.main(["--world-size", "2", "--timeout", "60", "--log-dir", str(run), shown],
                          out=out)  # fmt: skip
        assert EXIT_PROBE_FAILED == code
        outputs += [out.getvalue(), capsys.readouterr().err]
        outputs += [p.read_text() for p in run.glob("rank-*.json")]
    doc = json.loads(outputs[0])
    assert all(doc["reports"][r]["error"].startswith("RuntimeError: connect failed") for r in "01")
    for text in outputs:
        for secret in _SECRETS:
            assert secret not in text
        assert max(map(len, text.splitlines())) < 8000


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=40),
    form=st.sampled_from(
        ["password={}", "Authorization: Bearer {}", "https://u:{}@h.example/x", "token={}"]
    ),
    before=st.integers(0, 300_000),
    after=st.integers(0, 300_000),
)
def test_error_line_scrubs_and_bounds_any_message(
    secret: str, form: str, before: int, after: int
) -> None:
    """A rank's error line, for any position of a secret in a message of any size: the
    secret is gone, the line is bounded, it names the exception type; the log-read cause
    of a rank with no report too."""
    message = "a " * (before // 2) + form.format(secret) + " b" * (after // 2)
    line = error_line(RuntimeError(message))
    assert secret not in line
    assert line.startswith("RuntimeError: ")
    assert len(line) <= 2100


def test_last_exception_is_scrubbed_and_bounded(tmp_path: Path) -> None:
    """The cause read back from a rank's log (a crash's traceback) is scrubbed and cut."""
    log = tmp_path / "rank-0.log"
    crash = "ValueError: password=hunter2 at https://u:pw-SECRET@h/ " + "y" * 5000
    log.write_text(f"Traceback (most recent call last):\n{crash}\n")
    cause = last_exception(str(log)) or ""
    assert cause.startswith("ValueError: ")
    assert "hunter2" not in cause
    assert "pw-SECRET" not in cause
    assert len(cause) <= 600
    assert "pw" not in scrub("https://u:pw@h/")


@pytest.mark.parametrize("size", [MAX_WORLD_SIZE + 1, 100_000, 10**30])
def test_world_size_above_the_cap_is_bad_usage(
    size: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """--world-size past the cap: exit 2 and one line, before anything is started (100,000
    ranks were spawned before)."""
    assert EXIT_USAGE == probe.main(["--world-size", str(size)], out=io.StringIO())
    err = capsys.readouterr().err
    assert f"at most {MAX_WORLD_SIZE}" in err
    assert "Traceback" not in err
    assert 1 == len([line for line in err.splitlines() if "error:" in line])


def test_a_huge_number_argument_is_one_short_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A 100,000-digit --world-size is one short usage line, not the argument echoed."""
    assert EXIT_USAGE == probe.main(["--world-size", "9" * 100_000], out=io.StringIO())
    err = capsys.readouterr().err
    assert max(map(len, err.splitlines())) < 400


def _probe_cli(
    args: list[str], env: dict[str, str], prelude: str = ""
) -> subprocess.CompletedProcess[str]:
    code = f"import sys\n{prelude}\nfrom comm.probe.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=120, check=False, cwd=str(ROOT), env=env)  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OBS_", "COMM_"))}
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **extra}


def _no_coverage(env: dict[str, str]) -> dict[str, str]:
    """A child left without file descriptors cannot save coverage data (CI measures every
    child): coverage's own exit traceback is not the probe's."""
    return {k: v for k, v in env.items() if k != "COVERAGE_PROCESS_START"}


@pytest.mark.integration
def test_an_unusable_default_run_folder_is_one_line(tmp_path: Path) -> None:
    """$TMPDIR/comm-probe-$UID is a file (left there by anything): one line naming the
    problem and exit 1, not a FileExistsError traceback."""
    (tmp_path / f"comm-probe-{os.getuid()}").write_text("not a folder")
    done = _probe_cli(["--world-size", "1", "--otlp-endpoint", "http://127.0.0.1:9"],
                      _env(TMPDIR=str(tmp_path)))  # fmt: skip
    assert EXIT_PROBE_FAILED == done.returncode, done.stderr
    assert "Traceback" not in done.stderr
    assert "run folder" in done.stderr.splitlines()[-1]


@pytest.mark.integration
@pytest.mark.parametrize("how", ["run folder", "log dir"])
def test_json_is_one_document_when_the_probe_cannot_run(tmp_path: Path, how: str) -> None:
    """With ``--json`` stdout is one JSON document whatever happens: a probe that cannot
    run says so there too (exit code, verdict, the scrubbed reason), as on stderr (stdout
    was empty: a pipeline's ``json.load`` failed on it)."""
    blocker = tmp_path / f"comm-probe-{os.getuid()}"
    blocker.write_text("not a folder")
    args = ["--world-size", "1", "--otlp-endpoint", "http://127.0.0.1:9", "--json"]
    if how == "log dir":  # a folder that cannot be made: the OS refuses at launch
        args += ["--log-dir", str(tmp_path / "token=S3CRETVALUE" / "run")]
        (tmp_path / "token=S3CRETVALUE").write_text("a file, not a folder")
    done = _probe_cli(args, _env(TMPDIR=str(tmp_path)))
    assert done.returncode in (EXIT_PROBE_FAILED, EXIT_USAGE), done.stderr
    doc = json.loads(done.stdout)
    assert (done.returncode, "S3CRETVALUE" in done.stdout) == (doc["exit_code"], False)
    assert doc["error"]
    assert doc["verdict"]


@pytest.mark.integration
def test_out_of_file_descriptors_is_one_line(tmp_path: Path) -> None:
    """EMFILE (a real RLIMIT_NOFILE with no descriptor left) when the probe opens the pipe
    to its ranks: one line naming the problem and exit 1, not an OSError traceback."""
    prelude = textwrap.dedent(
        """
        import os, resource
        import tempfile
        import comm.probe.cli, comm.probe.launch, obs.settings, obs.errors
        tempfile.gettempdir()  # found before the descriptors run out
        lowest = os.open(os.devnull, os.O_RDONLY)
        os.close(lowest)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest, lowest))
        """
    )
    done = _probe_cli(
        ["--world-size", "1", "--otlp-endpoint", "http://127.0.0.1:9"],
        _no_coverage(_env(TMPDIR=str(tmp_path))), prelude,
    )  # fmt: skip
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 16  # ours is untouched
    assert EXIT_PROBE_FAILED == done.returncode, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.splitlines()[-1]
    assert "cannot start" in last
    assert "Too many open files" in last


def test_out_of_file_descriptors_with_a_log_dir_is_not_bad_usage(tmp_path: Path) -> None:
    """EMFILE while checking a good --log-dir says nothing about the argument: one line and
    exit 1, as without --log-dir (it read as bad usage, exit 2)."""
    prelude = textwrap.dedent(
        """
        import os, resource
        import comm.probe.cli, comm.probe.launch, obs.settings, obs.errors
        lowest = os.open(os.devnull, os.O_RDONLY)
        os.close(lowest)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest, lowest))
        """
    )
    done = _probe_cli(
        ["--world-size", "1", "--log-dir", str(tmp_path / "logs"),
         "--otlp-endpoint", "http://127.0.0.1:9"],
        _no_coverage(_env(TMPDIR=str(tmp_path))), prelude,
    )  # fmt: skip
    assert EXIT_PROBE_FAILED == done.returncode, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.splitlines()[-1]
    assert "Too many open files" in last
    assert 1 == len(done.stderr.splitlines()), done.stderr


def test_the_ranks_run_the_probes_own_comm(tmp_path: Path) -> None:
    """The launcher and ranks find this ``comm`` first, whatever PYTHONPATH or an editable
    install says: the path put first was the ``comm`` package folder itself (one level too
    deep), so they ran the installed comm, not the probe's."""
    env = _base_env(probe.ProbeSpec(world_size=1, log_dir=str(tmp_path)))
    first = env["PYTHONPATH"].split(os.pathsep)[0]
    assert Path(comm.__file__).resolve().parent.parent == Path(first).resolve()
    found = subprocess.run(
        [sys.executable, "-c", "import comm; print(comm.__file__)"],
        env=env, cwd=str(tmp_path), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert Path(comm.__file__).resolve() == Path(found.stdout.strip()).resolve()


@pytest.mark.parametrize("seconds", [str(MAX_TIMEOUT_S + 1), "1e300", "9" * 400])
def test_timeout_above_the_cap_is_bad_usage(
    seconds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--timeout past a day: exit 2 and one short line before any rank starts (1e300
    started the ranks, and each failed with torch's OverflowError)."""
    assert EXIT_USAGE == probe.main(["--timeout", seconds], out=io.StringIO())
    err = capsys.readouterr().err
    assert f"at most {MAX_TIMEOUT_S:g}" in err
    assert 1 == len([line for line in err.splitlines() if "error:" in line])
    assert max(map(len, err.splitlines())) < 400
