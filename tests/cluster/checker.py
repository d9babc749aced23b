"""A checker in the style of Jepsen's Kafka queue workload.

A test records what writers tried and what the cluster acknowledged (a
`History`), then reads every partition from the start with one or more
independent readers. `check` compares them and returns every violation it
finds (an empty list means the run was correct):

  lost            an acknowledged record is missing from a reader
  duplicate       a record appears more than once in one reader
  reorder         a reader got a partition's offsets out of increasing order
  divergence      two records at one (partition, offset), in one reader or
                  across readers (two brokers wrote the same place)
  moved           a record at different offsets in different readers, or not
                  at the offset its acknowledgement named
  phantom         a record no writer ever sent

Records not acknowledged (the writer saw an error or never heard back) may
be missing or present once: their fate is unknown, but they too never appear
twice. Every value must be unique across the whole run (e.g. "w1-000042").

`check_group` is the weaker rule for consumer groups, where a rebalance may
hand a record to a second member before the first committed it: every
acknowledged record is delivered at least once, at its one true offset.
"""

from dataclasses import dataclass, field

Read = tuple[int, bytes]   # (offset, value), in the order the reader got them


@dataclass
class History:
    # value -> (partition, offset or None) for every acknowledged record
    acked: dict[bytes, tuple[int, int | None]] = field(default_factory=dict)
    # every value a writer sent (acknowledged or not)
    attempted: set[bytes] = field(default_factory=set)

    def send(self, value: bytes) -> None:
        self.attempted.add(value)

    def ack(self, value: bytes, partition: int, offset: int | None) -> None:
        self.attempted.add(value)
        self.acked[value] = (partition, offset)

    def merge(self, other: "History") -> "History":
        self.attempted |= other.attempted
        self.acked.update(other.acked)
        return self


def check(history: History, reads: dict[str, dict[int, list[Read]]]) -> list[str]:
    """Violations of the queue rules; `reads` is reader name -> partition ->
    records in the order that reader received them."""
    problems: list[str] = []
    # (partition, offset) -> (value, reader) as first seen, across all readers
    at_offset: dict[tuple[int, int], tuple[bytes, str]] = {}
    # value -> ((partition, offset), reader) as first seen, across all readers
    where: dict[bytes, tuple[tuple[int, int], str]] = {}

    for reader, partitions in sorted(reads.items()):
        seen: dict[bytes, tuple[int, int]] = {}
        for p, records in sorted(partitions.items()):
            last = -1
            for offset, value in records:
                if offset <= last:
                    problems.append(f"reorder: {reader} read {p}/{offset} after {p}/{last}")
                last = max(last, offset)
                if value not in history.attempted:
                    problems.append(f"phantom: {reader} read {value!r} at {p}/{offset}, "
                                    "which no writer sent")
                if value in seen:
                    problems.append(f"duplicate: {reader} read {value!r} at {seen[value]} and "
                                    f"{(p, offset)}")
                    continue
                seen[value] = (p, offset)
                first = at_offset.setdefault((p, offset), (value, reader))
                if first[0] != value:
                    problems.append(f"divergence: {p}/{offset} holds {first[0]!r} for {first[1]} "
                                    f"but {value!r} for {reader}")
                place = where.setdefault(value, ((p, offset), reader))
                if place[0] != (p, offset):
                    problems.append(f"moved: {value!r} at {place[0]} for {place[1]} but at "
                                    f"{(p, offset)} for {reader}")
        for value, (p, offset) in sorted(history.acked.items()):
            got = seen.get(value)
            if got is None:
                problems.append(f"lost: acknowledged {value!r} ({p}/{offset}) not read by {reader}")
            elif got[0] != p or (offset is not None and got[1] != offset):
                problems.append(f"moved: {value!r} acknowledged at {p}/{offset} but read by "
                                f"{reader} at {got}")
    if not reads:
        problems.append("no readers: nothing was checked")
    return problems


def check_group(history: History, delivered: list[tuple[int, int, bytes]]) -> list[str]:
    """Violations for a consumer group: `delivered` is every (partition,
    offset, value) any member received. At-least-once: duplicates are allowed
    (a rebalance redelivers), but not a lost acknowledged record nor one
    record at two offsets nor two records at one offset."""
    problems: list[str] = []
    at_offset: dict[tuple[int, int], bytes] = {}
    where: dict[bytes, tuple[int, int]] = {}
    for p, offset, value in delivered:
        first = at_offset.setdefault((p, offset), value)
        if first != value:
            problems.append(f"divergence: group got {first!r} and {value!r} at {p}/{offset}")
        place = where.setdefault(value, (p, offset))
        if place != (p, offset):
            problems.append(f"moved: group got {value!r} at {place} and at {(p, offset)}")
        if value not in history.attempted:
            problems.append(f"phantom: group got {value!r} at {p}/{offset}")
    for value, (p, offset) in sorted(history.acked.items()):
        got = where.get(value)
        if got is None:
            problems.append(f"lost: acknowledged {value!r} ({p}/{offset}) never delivered to the group")
        elif got[0] != p or (offset is not None and got[1] != offset):
            problems.append(f"moved: {value!r} acknowledged at {p}/{offset}, delivered at {got}")
    return problems


def assert_ok(problems: list[str], limit: int = 30) -> None:
    if problems:
        shown = "\n  ".join(problems[:limit])
        more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
        raise AssertionError(f"{len(problems)} checker violation(s):\n  {shown}{more}")
