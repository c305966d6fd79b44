"""The top-level ``comm`` name is shared with Jupyter's ``comm`` (an ipykernel dependency).

pip installs both into the same ``site-packages/comm/`` folder without a warning, and the
one installed last owns ``comm/__init__.py``: Jupyter's kernel breaks, or ``import comm``
stops being ours. This module notices it (files in our folder that are not ours; our
``__init__`` replaced) and says so once, naming the other distribution.
"""

from __future__ import annotations

__all__ = ["conflict_message", "foreign_files", "warn_once"]

import os
import warnings

#: Every module this distribution puts in ``comm/`` (anything else came from elsewhere).
OUR_FILES = frozenset(
    {
        "__init__.py",
        "__main__.py",
        "_classify.py",
        "_packaging.py",
        "flashinfer_allreduce.py",
        "vllm_fi_ar.py",
        "events.py",
    }
)
_warned: list[bool] = []


def foreign_files(package_dir: str) -> list[str]:
    """Python files in ``package_dir`` that this distribution does not ship (cheap: one
    directory listing, so ``import comm`` can afford it)."""
    try:
        names = os.listdir(package_dir)
    except OSError:
        return []
    return sorted(n for n in names if n.endswith(".py") and n not in OUR_FILES)


def _other_distributions() -> list[str]:
    """Distributions other than ours that install a top-level ``comm`` (slow: only asked
    once a conflict was seen)."""
    try:
        from importlib.metadata import packages_distributions  # noqa: PLC0415

        return sorted({d for d in packages_distributions().get("comm", []) if d != "obs-comm"})
    except Exception:
        return []


def conflict_message(package_dir: str, ours_is_init: bool = True) -> str | None:
    """A sentence saying which distribution shares ``comm/`` with obs-comm, or None."""
    foreign = foreign_files(package_dir)
    if ours_is_init and not foreign:
        return None
    others = _other_distributions() or ["another distribution"]
    who = ", ".join(others)
    if not ours_is_init:
        return (
            f"comm: {who} overwrote obs-comm's comm/__init__.py in {package_dir} (both "
            "install a top-level 'comm' package; Jupyter's is an ipykernel dependency). "
            "Install obs-comm in its own virtual environment, or reinstall obs-comm to "
            "take the name back (that breaks Jupyter kernels in this environment)."
        )
    return (
        f"comm: obs-comm shares {package_dir} with {who} (files {', '.join(foreign[:5])}); "
        "obs-comm's comm/__init__.py replaced theirs, so code importing their 'comm' (Jupyter "
        "kernels via ipykernel) breaks here. Install obs-comm in its own virtual environment."
    )


def warn_once(package_dir: str, ours_is_init: bool = True) -> None:
    """Warn (once per process) when another distribution shares the ``comm`` folder."""
    if _warned:
        return
    message = conflict_message(package_dir, ours_is_init)
    if message is not None:
        _warned.append(True)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
