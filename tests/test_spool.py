"""Tests for obs._spool: bounded 0600 JSON-lines spool with a resumable, locked replay."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from obs._spool import Spool, SpoolRefused
from obs.otel.delivery import loss_key, merge_loss


def _docs(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"uid": f"u{i}", "body": "x" * 20} for i in range(start, start + n)]


class Collector:
    """An ``export`` callable for replay that stores batches and can fail on demand."""

    def __init__(self, fail_on_batch: int | None = None) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.fail_on_batch = fail_on_batch

    def __call__(self, batch: list[dict[str, Any]]) -> bool:
        if self.fail_on_batch is not None and len(self.batches) == self.fail_on_batch:
            self.fail_on_batch = None
            return False
        self.batches.append(batch)
        return True

    @property
    def uids(self) -> list[str]:
        return [d["uid"] for b in self.batches for d in b]


class TestAppend:
    def test_modes(self, tmp_path: Path) -> None:
        """The spool directory is created 0700 and the spool file 0600."""
        spool = Spool(str(tmp_path / "spool"), 1 << 20)
        assert 2 == spool.append(_docs(2))
        assert 0o700 == stat.S_IMODE(os.stat(tmp_path / "spool").st_mode)
        assert 0o600 == stat.S_IMODE(os.stat(tmp_path / "spool" / "spool.jsonl").st_mode)

    def test_one_json_object_per_line(self, tmp_path: Path) -> None:
        """Each record is one JSON line; values JSON cannot encode become strings."""
        spool = Spool(str(tmp_path), 1 << 20)
        spool.append([{"uid": "a", "obj": object()}, {"uid": "b"}])
        lines = (tmp_path / "spool.jsonl").read_text().splitlines()
        assert ["a", "b"] == [json.loads(line)["uid"] for line in lines]
        assert json.loads(lines[0])["obj"].startswith("<object object")

    def test_size_bound_refuses_what_does_not_fit(self, tmp_path: Path) -> None:
        """Lines beyond ``max_bytes`` are refused and the count that fit is returned."""
        line = len(json.dumps(_docs(1)[0], separators=(",", ":"))) + 1
        spool = Spool(str(tmp_path), line * 3 + 5)
        assert 3 == spool.append(_docs(5), reserved=True)
        assert 0 == spool.append(_docs(1, 9), reserved=True)
        assert line * 3 == spool.size()

    def test_reserve_is_kept_for_loss_reports(self, tmp_path: Path) -> None:
        """Ordinary records stop short of the reserve; obs' loss reports can still be
        written when the spool is otherwise full."""
        line = len(json.dumps(_docs(1, 10)[0], separators=(",", ":"))) + 1
        spool = Spool(str(tmp_path), line * 16)
        assert line * 2 == spool.reserve
        assert 14 == spool.append(_docs(20, 10))
        assert 0 == spool.append(_docs(1, 30))
        assert 2 == spool.append(_docs(3, 40), reserved=True)

    def test_pending(self, tmp_path: Path) -> None:
        """pending() is False for a missing or empty spool and True once written."""
        spool = Spool(str(tmp_path / "none"), 1 << 20)
        assert not spool.pending()
        spool.append(_docs(1))
        assert spool.pending()

    def test_refuses_a_directory_of_another_user(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A spool directory owned by someone else is not written to (symlink/tmp attacks)."""
        monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)
        with pytest.raises(PermissionError):
            Spool(str(tmp_path), 1 << 20).append(_docs(1))


class TestReplay:
    def test_replays_in_batches_then_removes_files(self, tmp_path: Path) -> None:
        """Replay hands every record to export once, in order and in batches, then cleans up."""
        spool = Spool(str(tmp_path), 1 << 20)
        spool.append(_docs(5))
        sink = Collector()
        result = spool.replay(sink, batch_size=2)
        assert [f"u{i}" for i in range(5)] == sink.uids
        assert [2, 2, 1] == [len(b) for b in sink.batches]
        assert (5, False, False) == (result.replayed, result.failed, result.skipped)
        assert not spool.pending()
        assert {"replay.lock"} == set(os.listdir(tmp_path))

    def test_failure_resumes_without_duplicates(self, tmp_path: Path) -> None:
        """A failed batch stops replay; the next replay resumes after the last delivered batch."""
        spool = Spool(str(tmp_path), 1 << 20)
        spool.append(_docs(6))
        sink = Collector(fail_on_batch=1)
        first = spool.replay(sink, batch_size=2)
        assert (2, True) == (first.replayed, first.failed)
        spool.append(_docs(2, 6))  # written while the replay file is pending
        second = spool.replay(sink, batch_size=2)
        assert [f"u{i}" for i in range(8)] == sink.uids
        assert 6 == second.replayed
        assert not spool.pending()

    def test_corrupt_and_torn_lines_are_skipped(self, tmp_path: Path) -> None:
        """Garbage lines and a torn last line are counted as corrupt, never replayed or fatal."""
        spool = Spool(str(tmp_path), 1 << 20)
        spool.append(_docs(1))
        with open(tmp_path / "spool.jsonl", "ab") as f:
            f.write(b"not json\n[1, 2]\n")
            f.write(b'{"uid": "torn"')
        sink = Collector()
        result = spool.replay(sink, batch_size=10)
        assert ["u0"] == sink.uids
        assert 3 == result.corrupt

    def test_records_appended_after_a_torn_line_are_whole(self, tmp_path: Path) -> None:
        """A writer that died mid-line leaves the file without a final newline: the next
        append ends that line first, so only the torn line is corrupt, not the next
        record glued to it."""
        spool = Spool(str(tmp_path), 1 << 20)
        spool.append(_docs(1))
        with open(tmp_path / "spool.jsonl", "ab") as f:
            f.write(b'{"uid": "torn", "bo')
        spool.append(_docs(2, start=1))
        sink = Collector()
        result = spool.replay(sink, batch_size=10)
        assert (["u0", "u1", "u2"], 1) == (sink.uids, result.corrupt)

    @settings(max_examples=40, deadline=None)
    @given(torn=st.binary(min_size=1, max_size=60).filter(lambda b: not b.endswith(b"\n")))
    def test_any_torn_tail_costs_only_itself(self, torn: bytes) -> None:
        """Whatever bytes a dead writer left unterminated, every record appended after
        them is replayed."""
        with tempfile.TemporaryDirectory() as tmp:
            spool = Spool(tmp, 1 << 20)
            spool.append(_docs(1))
            with open(os.path.join(tmp, "spool.jsonl"), "ab") as f:
                f.write(torn)
            spool.append(_docs(3, start=1))
            sink = Collector()
            spool.replay(sink, batch_size=10)
            assert ["u1", "u2", "u3"] == sink.uids[-3:]

    def test_second_replayer_skips_while_locked(self, tmp_path: Path) -> None:
        """A replay while another process holds the replay lock does nothing (no double replay)."""
        spool = Spool(str(tmp_path), 1 << 20)
        spool.append(_docs(3))
        fd = os.open(tmp_path / "replay.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            sink = Collector()
            assert spool.replay(sink, batch_size=10).skipped
            assert [] == sink.uids
        finally:
            os.close(fd)
        assert 3 == spool.replay(Collector(), batch_size=10).replayed

    def test_should_stop_pauses(self, tmp_path: Path) -> None:
        """should_stop() pauses replay between batches; a later call continues where it was."""
        spool = Spool(str(tmp_path), 1 << 20)
        spool.append(_docs(4))
        sink = Collector()
        calls = iter([False, True])
        spool.replay(sink, batch_size=2, should_stop=lambda: next(calls, False))
        assert ["u0", "u1"] == sink.uids
        spool.replay(sink, batch_size=2)
        assert ["u0", "u1", "u2", "u3"] == sink.uids

    def test_writers_during_replay_are_not_lost(self, tmp_path: Path) -> None:
        """Records appended concurrently with a replay land in the next spool file, so every
        record is delivered exactly once across replays."""
        spool = Spool(str(tmp_path), 1 << 24)
        spool.append(_docs(50))
        stop = threading.Event()
        written: list[int] = []

        def writer() -> None:  # bounded: a replay reads what was there when it began,
            n = 1000  # so an unpaced writer only makes each next file longer, not a hang
            while not stop.is_set() and n < 4000:
                spool.append(_docs(1, n))
                written.append(n)
                n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        sink = Collector()
        try:
            for _ in range(5):
                spool.replay(sink, batch_size=7)
        finally:
            stop.set()
            thread.join()
        spool.replay(sink, batch_size=7)
        expected = [f"u{i}" for i in range(50)] + [f"u{n}" for n in written]
        assert sorted(expected) == sorted(sink.uids)
        assert len(sink.uids) == len(set(sink.uids))

    @pytest.mark.timeout(30)
    def test_two_processes_never_double_replay(self, tmp_path: Path) -> None:
        """Two processes replaying the same spool concurrently deliver each record once."""
        spool = Spool(str(tmp_path), 1 << 24)
        spool.append(_docs(400))
        script = (
            "import sys, json, time\n"
            "from obs._spool import Spool\n"
            "out = []\n"
            "def export(batch):\n"
            "    time.sleep(0.01)\n"
            "    out.extend(d['uid'] for d in batch)\n"
            "    return True\n"
            "for _ in range(20):\n"
            "    Spool(sys.argv[1], 1 << 24).replay(export, 10)\n"
            "print(json.dumps(out))\n"
        )
        procs = [
            subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE)
            for _ in range(2)
        ]
        uids: list[str] = []
        for proc in procs:
            out, _ = proc.communicate(timeout=25)
            uids.extend(json.loads(out))
        assert sorted(f"u{i}" for i in range(400)) == sorted(uids)


NOBODY = 65534
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="chown to a second uid needs root")


class TestHostileDirectory:
    """Another local user must not redirect, poison or loosen the spool (issue 11 item 6)."""

    def test_symlinked_directory_is_refused_and_left_alone(self, tmp_path: Path) -> None:
        """A symlink at the spool path is not followed: nothing is written through it and
        the directory it points to keeps its mode."""
        target = tmp_path / "victims-dir"
        target.mkdir(mode=0o755)
        target.chmod(0o755)
        (tmp_path / "spool").symlink_to(target)
        with pytest.raises(SpoolRefused):
            Spool(str(tmp_path / "spool"), 1 << 20).append(_docs(1))
        assert 0o755 == stat.S_IMODE(os.stat(target).st_mode)
        assert [] == os.listdir(target)

    def test_loose_directory_is_refused_not_chmodded(self, tmp_path: Path) -> None:
        """A group/other-writable directory obs did not create is refused, mode unchanged."""
        loose = tmp_path / "loose"
        loose.mkdir()
        loose.chmod(0o777)
        with pytest.raises(SpoolRefused):
            Spool(str(loose), 1 << 20).append(_docs(1))
        assert 0o777 == stat.S_IMODE(os.stat(loose).st_mode)
        assert [] == os.listdir(loose)

    def test_readable_directory_of_ours_is_used_unchanged(self, tmp_path: Path) -> None:
        """A 0755 directory of the current user is used as it is (never chmodded)."""
        mine = tmp_path / "mine"
        mine.mkdir()
        mine.chmod(0o755)
        assert 1 == Spool(str(mine), 1 << 20).append(_docs(1))
        assert 0o755 == stat.S_IMODE(os.stat(mine).st_mode)

    @needs_root
    def test_directory_of_another_uid_is_refused(self, tmp_path: Path) -> None:
        """A spool directory owned by another uid is refused."""
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, NOBODY, NOBODY)
        with pytest.raises(SpoolRefused):
            Spool(str(other), 1 << 20).append(_docs(1))

    def test_symlink_flipped_mid_run_gets_no_records(self, tmp_path: Path) -> None:
        """Replacing the spool directory with a symlink mid-run sends nothing to its target."""
        real = tmp_path / "spool"
        spool = Spool(str(real), 1 << 20)
        assert 1 == spool.append(_docs(1))
        attacker = tmp_path / "attacker"
        attacker.mkdir(mode=0o700)
        real.rename(tmp_path / "moved")
        real.symlink_to(attacker)
        with pytest.raises(SpoolRefused):
            spool.append(_docs(5, 1))
        assert [] == os.listdir(attacker)

    @needs_root
    @pytest.mark.parametrize("name", ["spool.jsonl", "spool.replay.jsonl"])
    def test_planted_file_of_another_uid_is_never_replayed(self, tmp_path: Path, name: str) -> None:
        """A spool file owned by another uid is set aside, never replayed or appended to."""
        forged = tmp_path / name
        forged.write_text(json.dumps({"uid": "forged", "sev": "FATAL"}) + "\n")
        forged.chmod(0o600)
        os.chown(forged, NOBODY, NOBODY)
        spool = Spool(str(tmp_path), 1 << 20)
        assert 1 == spool.append(_docs(1))
        sink = Collector()
        spool.replay(sink, batch_size=10)
        assert ["u0"] == sink.uids
        refused = [n for n in os.listdir(tmp_path) if n.startswith(f"refused.{name}.")]
        assert 1 == len(refused)
        assert NOBODY == os.stat(tmp_path / refused[0]).st_uid

    def test_file_readable_by_others_is_never_replayed(self, tmp_path: Path) -> None:
        """A replay file with a mode other than owner-only is set aside, not replayed."""
        forged = tmp_path / "spool.replay.jsonl"
        forged.write_text(json.dumps({"uid": "forged"}) + "\n")
        forged.chmod(0o644)
        sink = Collector()
        result = Spool(str(tmp_path), 1 << 20).replay(sink, batch_size=10)
        assert ([], 1) == (sink.uids, result.refused)
        assert any(n.startswith("refused.spool.replay.jsonl.") for n in os.listdir(tmp_path))


class TestPartialReplay:
    """A collector can take part of a batch and then fail (a split request's first half
    accepted, the collector down for the second): replay keeps that progress."""

    @settings(max_examples=60, deadline=None)
    @given(
        layout=st.lists(st.booleans(), min_size=1, max_size=30),  # True: a record, False: junk
        answers=st.lists(st.integers(min_value=-2, max_value=12), min_size=1, max_size=40),
        batch_size=st.integers(min_value=1, max_value=8),
    )
    def test_every_record_once_in_order_and_junk_counted_once(
        self, layout: list[bool], answers: list[int], batch_size: int
    ) -> None:
        """Whatever prefix of each batch the export takes (answers: how many; beyond the
        batch, all), replaying until done hands every record over exactly once, in
        order, and counts each junk line exactly once. It used to resend a batch whole
        (the prefix twice) and count junk again on every failed attempt."""
        with tempfile.TemporaryDirectory() as tmp:
            spool = Spool(tmp, 1 << 20)
            lines = [
                json.dumps({"uid": f"u{i}"}).encode() + b"\n" if is_record else b"junk\n"
                for i, is_record in enumerate(layout)
            ]
            with open(os.path.join(tmp, "spool.jsonl"), "wb") as f:
                f.writelines(lines)
            os.chmod(os.path.join(tmp, "spool.jsonl"), 0o600)
            took: list[str] = []
            script = iter(answers)

            def export(batch: list[dict[str, Any]]) -> bool | int:
                n = next(script, len(batch))
                done = batch[: max(n, 0)]
                took.extend(d["uid"] for d in done)
                return True if n >= len(batch) else n

            corrupt = 0
            for _ in range(len(answers) + len(layout) + 2):
                result = spool.replay(export, batch_size)
                corrupt += result.corrupt
                if not result.failed:
                    break
            assert [f"u{i}" for i, r in enumerate(layout) if r] == took
            assert layout.count(False) == corrupt
            assert not spool.pending()


def _loss_report(reason: str, level: str, n: int) -> dict[str, Any]:
    return {
        "v": 1,
        "cls": 2,
        "name": "obs_records_dropped",
        "body": f"{n} log records were not exported ({reason})",
        "attrs": {"reason": reason, "count": n, "dropped": {level: n}},
    }


class TestKeptLossReports:
    @settings(max_examples=40, deadline=None)
    @given(
        reports=st.lists(
            st.tuples(
                st.sampled_from(["spool_full", "spool_error", "queue_full"]),
                st.sampled_from(["WARNING", "ERROR"]),
                st.integers(1, 10**6),
            ),
            min_size=1,
            max_size=12,
        ),
        failures=st.lists(st.sampled_from([False, 0, 1, True]), max_size=4),
        garbage=st.sampled_from([None, b"", b"{", b"[1]", b'{"k": 3}', b"\xff"]),
    )
    def test_every_kept_count_is_replayed_once(
        self,
        reports: list[tuple[str, str, int]],
        failures: list[bool | int],
        garbage: bytes | None,
    ) -> None:
        """Loss reports kept for want of room (any kinds, any counts, a lost file that was
        garbage before them) are replayed with their counts summed per reason and level,
        once, whatever the collector did to the replays before (down, took part)."""
        with tempfile.TemporaryDirectory() as tmp:
            spool = Spool(tmp, 10**6)
            if garbage is not None:
                fd = os.open(os.path.join(tmp, "spool.lost.json"), os.O_WRONLY | os.O_CREAT, 0o600)
                os.write(fd, garbage)
                os.close(fd)
            for reason, level, n in reports:
                line = _loss_report(reason, level, n)
                spool.keep_lost({loss_key(line): line}, merge_loss)
            got: list[dict[str, Any]] = []
            answers = list(failures)

            def export(docs: list[dict[str, Any]]) -> bool | int:
                answer = answers.pop(0) if answers else True
                n = len(docs) if answer is True else min(int(answer), len(docs))
                got.extend(docs[:n])
                return answer if answer is True else n

            for _ in range(len(failures) + 1):
                spool.replay(export, 10, merge=merge_loss)
            assert not spool.pending()
            want: dict[tuple[str, str], int] = {}
            for reason, level, n in reports:
                want[reason, level] = want.get((reason, level), 0) + n
            seen: dict[tuple[str, str], int] = {}
            for doc in got:
                attrs = doc["attrs"]
                assert attrs["count"] == sum(attrs["dropped"].values())
                for level, n in attrs["dropped"].items():
                    key = (attrs["reason"], level)
                    seen[key] = seen.get(key, 0) + n
            assert want == seen


_KILLED_REPLAY = """
import json, os, sys
from obs._spool import Spool
from obs.otel.delivery import merge_loss
spool_dir, taken, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = []
def export(docs):
    calls.append(1)
    if len(calls) > kill_at:
        os._exit(9)  # killed while its request is on the wire: the collector got nothing
    with open(taken, "a") as f:
        f.writelines(json.dumps(d) + "\\n" for d in docs)
    return True
Spool(spool_dir, 10**6).replay(export, 2, merge=merge_loss)
"""


class TestKilledReplay:
    @settings(max_examples=4, deadline=None)
    @example(reports=[("spool_full", 7)], records=3, kill_at=0)
    @given(
        reports=st.lists(
            st.tuples(st.sampled_from(["spool_full", "spool_error"]), st.integers(1, 10**6)),
            min_size=1,
            max_size=4,
        ),
        records=st.integers(0, 5),
        kill_at=st.integers(0, 3),
    )
    def test_a_process_killed_mid_replay_loses_no_count(
        self, reports: list[tuple[str, int]], records: int, kill_at: int
    ) -> None:
        """A process killed while a replay's request is on the wire (SIGKILL, the OOM
        killer, a launcher's os._exit at shutdown), before the collector got it: the next
        replay delivers every kept loss count and spooled record exactly once. The kept
        loss reports were unlinked before their export: a process killed then lost them."""
        with tempfile.TemporaryDirectory() as tmp:
            spool = Spool(tmp, 10**6)
            spool.append(_docs(records))
            for reason, n in reports:
                line = _loss_report(reason, "ERROR", n)
                spool.keep_lost({loss_key(line): line}, merge_loss)
            taken = os.path.join(tmp, "taken.jsonl")
            child = [sys.executable, "-c", _KILLED_REPLAY, tmp, taken, str(kill_at)]
            assert subprocess.run(child, check=False, timeout=60).returncode in {0, 9}
            got = (
                [json.loads(x) for x in Path(taken).read_text().splitlines()]
                if (os.path.exists(taken))
                else []
            )
            again = Collector()
            Spool(tmp, 10**6).replay(again, 10, merge=merge_loss)
            got += [d for b in again.batches for d in b]
            want: dict[str, int] = {}
            for reason, n in reports:
                want[reason] = want.get(reason, 0) + n
            seen: dict[str, int] = {}
            for doc in got:
                if doc.get("name") == "obs_records_dropped":
                    reason = doc["attrs"]["reason"]
                    seen[reason] = seen.get(reason, 0) + doc["attrs"]["count"]
            uids = sorted(d["uid"] for d in got if "uid" in d)
            assert (want, sorted(d["uid"] for d in _docs(records))) == (seen, uids)
