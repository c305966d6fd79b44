"""comm shares its top-level name with Jupyter's ``comm``: the clash is detected and said."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUPYTER_INIT = '"""Jupyter comm."""\n\n\ndef create_comm(*args, **kwargs):\n    return None\n'


def _site(tmp_path: Path, *, jupyter_init: bool) -> Path:
    """A site folder where Jupyter's ``comm`` 0.2.2 and obs-comm share ``comm/``, with the
    dist-info a pip install leaves (so importlib.metadata can name the other one)."""
    site = tmp_path / "site"
    pkg = site / "comm"
    shutil.copytree(ROOT / "comm", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "base_comm.py").write_text("class BaseComm:\n    pass\n")
    if jupyter_init:
        (pkg / "__init__.py").write_text(JUPYTER_INIT)
    info = site / "comm-0.2.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: comm\nVersion: 0.2.2\n")
    (info / "RECORD").write_text("comm/__init__.py,,\ncomm/base_comm.py,,\n")
    return site


def _run(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(site), str(ROOT)))}
    return subprocess.run(
        [sys.executable, "-W", "default", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        cwd=str(site),
    )


class TestNameClash:
    def test_import_comm_says_it_replaced_jupyters(self, tmp_path: Path) -> None:
        """Our __init__ won: `import comm` warns once, naming the other distribution."""
        proc = _run(_site(tmp_path, jupyter_init=False), "-c", "import comm, comm; print('ok')")
        assert "ok" in proc.stdout, proc.stderr
        assert 1 == proc.stderr.count("RuntimeWarning: comm: obs-comm shares"), proc.stderr
        assert "with comm (files base_comm.py)" in proc.stderr

    def test_python_m_comm_says_jupyter_overwrote_it(self, tmp_path: Path) -> None:
        """Jupyter's __init__ won: `python -m comm` says so before its usage text."""
        proc = _run(_site(tmp_path, jupyter_init=True), "-m", "comm")
        assert "comm: comm overwrote obs-comm's comm/__init__.py" in proc.stderr, proc.stderr
        assert 2 == proc.returncode

    def test_no_clash_no_word(self) -> None:
        """In this checkout (no other 'comm'), import comm is silent."""
        proc = subprocess.run(
            [sys.executable, "-W", "error", "-c", "import comm"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=str(ROOT),
        )
        assert (0, "") == (proc.returncode, proc.stderr)
