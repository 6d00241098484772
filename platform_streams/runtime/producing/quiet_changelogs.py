"""Changelog records sent without a delivery report, proved written by offsets.

Why: at-least-once, every changelog record used to carry a delivery report, because a
checkpoint needs the offset written and a failed changelog record must fail the commit
(the store already holds the change). A report is a Python callback per record (the
producer's poll, a ``Message`` built, the collector's ``on_delivery``): about 6 % of the
stream thread of an every-key-new count (bench/RESULTS.md).

A cache flush sends its changelog records in one loop; only its last record needs a
report for the checkpoint. The changelog producer is idempotent (``producer_settings``):
it neither duplicates nor reorders, so the records one client writes to a changelog
partition take consecutive offsets. Hence the proof: between two moments when everything
sent is acknowledged (the collector's ``flush``, before a commit or a clean close), the
offset of the last acknowledged record minus that of the last one proved before (the
*anchor*) must be at least the number of records sent to the partition in between, the
unreported ones included. Fewer means records were lost: the collector raises, as for a
failed report, and the commit does not happen. More means someone else wrote too (a
zombie instance under at-least-once, which Kafka Streams does not guard against either):
not a loss, and the check moves on.

A partition needs an anchor before its flushes may send quietly: the first reported record
acknowledged after :meth:`QuietChangelogs.forget` (a task instance begins) or after a flush
that failed half-way (its quiet records have no reported record after them). Until then
every record of the partition is reported, as before.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["QuietChangelogs"]

TopicPartition = tuple[str, int]


class QuietChangelogs:
    """Per changelog partition: the anchor, the records sent since without a report and the
    reported ones acknowledged since (the collector's ``on_delivery`` counts those in line:
    :attr:`acked`, :attr:`reanchor`)."""

    __slots__ = ("acked", "anchors", "blocked", "quiet", "reanchor", "total")

    def __init__(self) -> None:
        #: offset of the last record proved written, per partition
        self.anchors: dict[TopicPartition, int] = {}
        #: records sent without a report since the anchor
        self.quiet: dict[TopicPartition, int] = {}
        #: reported records acknowledged since the anchor
        self.acked: dict[TopicPartition, int] = {}
        #: partitions whose next acknowledged report becomes their anchor
        self.reanchor: set[TopicPartition] = set()
        #: partitions that take no anchor before the next :meth:`check` (``forget(in_flight)``)
        self.blocked: set[TopicPartition] = set()
        #: records sent without a report so far, all partitions (what the tests look at)
        self.total = 0

    def may_send_quietly(self, tp: TopicPartition) -> bool:
        """Whether a flush may send ``tp``'s records without reports (it has an anchor)."""
        if tp in self.anchors and tp not in self.reanchor:
            return True
        self.reanchor.add(tp)
        return False

    def acknowledged(self, tp: TopicPartition, offset: int) -> None:
        """A reported record of ``tp`` was written at ``offset``."""
        if tp in self.blocked:
            return
        if tp in self.reanchor or tp not in self.anchors:
            self.reanchor.discard(tp)
            self.anchors[tp] = offset
            self.quiet[tp] = self.acked[tp] = 0
        else:
            self.acked[tp] = self.acked.get(tp, 0) + 1

    def sent(self, tp: TopicPartition, records: int) -> None:
        """``records`` of ``tp`` went to librdkafka without a report."""
        self.quiet[tp] = self.quiet.get(tp, 0) + records
        self.total += records

    def forget(self, tp: TopicPartition, *, in_flight: bool = False) -> None:
        """Start over for ``tp`` (a new task instance, or a flush whose quiet records could
        not be followed by a reported one): nothing is sent quietly until a reported record
        gives it a new anchor. ``in_flight``: an earlier instance's records may still be
        under way (the wait for them timed out), so its next acknowledgement could be one of
        theirs; no anchor is taken before the next :meth:`check` (everything acknowledged)."""
        self.anchors.pop(tp, None)
        self.quiet.pop(tp, None)
        self.acked.pop(tp, None)
        self.reanchor.add(tp)
        if in_flight:
            self.blocked.add(tp)

    def check(self, offsets: Mapping[TopicPartition, int]) -> list[str]:
        """Everything sent is acknowledged: prove the quiet records written and move each
        anchor to the partition's last offset. Returns one message per partition that lost
        records (empty if none did)."""
        self.blocked.clear()  # whatever was in flight is acknowledged now
        lost: list[str] = []
        for tp, quiet in self.quiet.items():
            if tp in self.reanchor:
                continue
            anchor, last = self.anchors[tp], offsets.get(tp, -1)
            sent = quiet + self.acked.get(tp, 0)
            if last - anchor < sent:
                lost.append(
                    f"{tp[0]}[{tp[1]}]: {sent - (last - anchor)} of {sent} changelog record(s) "
                    f"sent after offset {anchor} were not written (the last written is {last})"
                )
            self.anchors[tp] = max(anchor, last)
            self.quiet[tp] = self.acked[tp] = 0
        for tp, acked in self.acked.items():
            if acked and tp not in self.reanchor:  # reported records only: the anchor follows
                self.anchors[tp] = max(self.anchors[tp], offsets.get(tp, -1))
                self.acked[tp] = 0
        return lost
