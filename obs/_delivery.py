"""``obs.delivery()``'s report: what OTLP export did so far, from the export sink's
counters (kept here, out of the runtime's hot-path module)."""

from __future__ import annotations

__all__ = ["delivery_report", "stats_of"]

from typing import TYPE_CHECKING, Any

from obs._lokifit import FOLDED_COUNT
from obs.encode import scrub_text

if TYPE_CHECKING:
    from obs.settings import Settings


def stats_of(sink: Any) -> dict[str, Any] | None:
    """The export sink's delivery counters (None when it has none or they fail)."""
    try:
        stats = sink.stats()
    except Exception:
        return None
    return stats if isinstance(stats, dict) else None


def delivery_report(
    settings: Settings,
    stats: dict[str, Any] | None,
    unexported_after_shutdown: int,
    not_written: int = 0,
) -> dict[str, Any]:
    """Where to, records sent (queued for export), acknowledged by the collector, spooled,
    dropped, still queued, in flight (being exported or spooled): sent is their sum
    (``spooled`` is what became of a record when sent: it stays counted after a replay
    delivered it); then spooled records a replay delivered (``replay_delivered``) or gave
    up (``replay_dropped``: rejected, corrupt), this process's or another's, so outside
    that sum, and spool lines of another format
    version kept unreplayed (``spool_kept``), from ``stats`` (None: not
    exporting); ``not_written``: lines no console or ``OBS_FILE`` took (a broken sink,
    re-entrant overflow); ``folded``: exported records and ``folded_lines``: JSON lines
    folded to fit Loki's limits."""
    url = settings.otlp_logs_url
    out: dict[str, Any] = {
        "exporting": stats is not None,
        "endpoint": scrub_text(url) if url else None,
        "protocol": settings.otlp_protocol,
    }
    stats = stats or {}
    dropped = stats.get("dropped") or {}
    out.update(
        sent=int(stats.get("enqueued", 0)),
        acknowledged=int(stats.get("exported", 0)),
        spooled=int(stats.get("spooled", 0)),
        dropped=sum(int(n) for n in dropped.values()),
        queued=int(stats.get("queued", 0)),
        in_flight=int(stats.get("in_flight", 0)),
        replay_delivered=int(stats.get("replay_delivered", 0)),
        replay_dropped=sum(int(n) for n in (stats.get("replay_dropped") or {}).values()),
        spool_kept=int(stats.get("spool_kept", 0)),
        unexported_after_shutdown=unexported_after_shutdown,
        not_written=not_written,
        folded=int(stats.get("folded", 0)),
        folded_lines=FOLDED_COUNT.lines,
    )
    return out
