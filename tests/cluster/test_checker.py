"""The checker must catch what it exists to catch: each test feeds it one
kind of broken history and expects exactly that kind of violation (and a
correct history must pass, or every cluster test would be vacuous)."""

import pytest

from checker import History, assert_ok, check, check_group


def history(*acked):
    """History with values v0.. acknowledged at (partition, offset) `acked`."""
    h = History()
    for i, (p, off) in enumerate(acked):
        h.ack(f"v{i}".encode(), p, off)
    return h


def good_reads():
    return {0: [(0, b"v0"), (1, b"v1")], 1: [(0, b"v2")]}


def kinds(problems):
    return sorted({p.split(":", 1)[0] for p in problems})


def test_a_correct_history_passes():
    h = history((0, 0), (0, 1), (1, 0))
    h.send(b"unacked-never-read")
    assert check(h, {"a": good_reads(), "b": good_reads()}) == []


def test_an_unacknowledged_record_read_once_passes():
    h = history((0, 0))
    h.send(b"maybe")
    assert check(h, {"a": {0: [(0, b"v0"), (1, b"maybe")]}}) == []


def test_a_lost_acknowledged_record_fails():
    h = history((0, 0), (0, 1), (1, 0))
    reads = good_reads()
    reads[0] = [(0, b"v0")]
    assert kinds(check(h, {"a": reads})) == ["lost"]


def test_a_record_lost_by_only_one_reader_fails():
    h = history((0, 0), (0, 1), (1, 0))
    partial = good_reads()
    partial[1] = []
    assert kinds(check(h, {"a": good_reads(), "b": partial})) == ["lost"]


def test_a_duplicated_acknowledged_record_fails():
    h = history((0, 0), (0, 1), (1, 0))
    reads = good_reads()
    reads[0].append((2, b"v1"))
    assert "duplicate" in kinds(check(h, {"a": reads}))


def test_an_unacknowledged_record_that_appears_twice_fails():
    h = history((0, 0))
    h.send(b"retried")
    reads = {0: [(0, b"v0"), (1, b"retried"), (2, b"retried")]}
    assert kinds(check(h, {"a": reads})) == ["duplicate"]


def test_offsets_out_of_order_fail():
    h = history((0, 0), (0, 1), (1, 0))
    reads = good_reads()
    reads[0] = [(1, b"v1"), (0, b"v0")]
    assert "reorder" in kinds(check(h, {"a": reads}))


def test_two_records_at_one_offset_across_readers_fail():
    h = history((0, 0), (1, 0))
    h.send(b"zombie")
    a = {0: [(0, b"v0"), (1, b"zombie")], 1: [(0, b"v1")]}
    b = {0: [(0, b"v0")], 1: [(0, b"v1")]}
    b[0].append((1, b"other"))
    h.send(b"other")
    assert "divergence" in kinds(check(h, {"a": a, "b": b}))


def test_a_record_at_another_offset_than_acknowledged_fails():
    h = history((0, 0), (0, 1))
    reads = {0: [(0, b"v0"), (5, b"v1")]}
    assert kinds(check(h, {"a": reads})) == ["moved"]


def test_a_record_no_writer_sent_fails():
    h = history((0, 0))
    reads = {0: [(0, b"v0"), (1, b"ghost")]}
    assert kinds(check(h, {"a": reads})) == ["phantom"]


def test_no_readers_fails():
    assert kinds(check(history((0, 0)), {})) == ["no readers"]


def test_assert_ok_raises_with_the_violations():
    with pytest.raises(AssertionError, match="lost"):
        assert_ok(check(history((0, 0)), {"a": {0: []}}))


def test_group_redelivery_passes_but_a_loss_fails():
    h = history((0, 0), (0, 1))
    assert check_group(h, [(0, 0, b"v0"), (0, 1, b"v1"), (0, 1, b"v1")]) == []
    assert kinds(check_group(h, [(0, 0, b"v0")])) == ["lost"]
    assert "divergence" in kinds(check_group(h, [(0, 0, b"v0"), (0, 1, b"v1"), (0, 1, b"x")]))
