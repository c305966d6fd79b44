"""``python -m comm probe``: run the workspace fallback chain on N local ranks and report.

The parent starts an OTLP receiver on loopback (unless an endpoint is configured), then a
launcher process that starts the ranks with torchrun's environment (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``), so ``--nodes 2`` simulates two nodes on one machine. Each rank
configures obs (exporting over OTLP), joins a gloo (CPU) or nccl (GPUs) process group,
runs both getters, writes its report and flushes obs. The parent prints a line per rank
as it starts, a per-rank table, and what arrived over OTLP per event and rank.

Speed: on a CPU-only torch build the launcher imports torch and flashinfer once and forks
the ranks (importing flashinfer takes seconds per process); with a CUDA build it starts a
fresh interpreter per rank instead, since CUDA does not survive fork.

Exit status: 0 every rank initialized both workspaces, 3 a terminal failure on any rank,
4 records were not delivered over OTLP (obs' own counters: sent but not acknowledged), 2
bad usage, 1 the probe itself failed (a rank crashed or timed out). 4 wins over 3: a
terminal failure the collector never received is one nobody will be alerted to. Ctrl-C or
SIGTERM kills the launcher and every rank (their own session) and exits 130 or 143. A
rank (or the launcher) that ends before reporting stops the run a few seconds later
(:data:`~comm.probe.launch.DEATH_GRACE_S`), since the ranks waiting for it never finish;
an OS error setting up the run is one line and exit 1. ``--world-size`` is at most
:data:`~comm.probe.spec.MAX_WORLD_SIZE`.

The package: :mod:`~comm.probe.spec` (the data), :mod:`~comm.probe.launch` (the parent
and the launcher), :mod:`~comm.probe.rank` (a rank), :mod:`~comm.probe.report` (tables
and summaries), :mod:`~comm.probe.cli`.

Run directories: without ``--log-dir`` each run writes under
``$TMPDIR/comm-probe-$UID/run-*``, and only the last :data:`KEEP_RUNS` runs are kept.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__ = [
    "KEEP_RUNS",
    "ChainReport",
    "ProbeResult",
    "ProbeSpec",
    "RankReport",
    "build_parser",
    "failure_causes",
    "format_ranks",
    "is_logs_url",
    "last_exception",
    "launch",
    "main",
    "new_run_dir",
    "render_delivery",
    "render_grouped",
    "render_table",
    "result_json",
    "summarize_records",
]

from comm.probe.cli import build_parser, main
from comm.probe.launch import is_logs_url, launch, new_run_dir
from comm.probe.report import (
    failure_causes,
    format_ranks,
    last_exception,
    render_delivery,
    render_grouped,
    render_table,
    result_json,
    summarize_records,
)
from comm.probe.spec import KEEP_RUNS, ChainReport, ProbeResult, ProbeSpec, RankReport
