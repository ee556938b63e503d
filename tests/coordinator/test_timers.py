from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.core.timers import Timers


def test_poll_returns_due_keys_in_deadline_order_once() -> None:
    t: Timers[str] = Timers()
    t.schedule("c", 30)
    t.schedule("a", 10)
    t.schedule("b", 20)
    assert t.poll(9, 100) == []
    assert t.poll(25, 100) == ["a", "b"]
    assert t.poll(25, 100) == []
    assert "c" in t and "a" not in t
    assert t.poll(1000, 100) == ["c"]
    assert len(t) == 0 and t.next_deadline() is None


def test_rearming_later_updates_in_place_without_heap_garbage() -> None:
    t: Timers[tuple[str, str]] = Timers()
    key = ("session", "m")
    t.schedule(key, 100)
    for deadline in range(101, 10_101):
        t.schedule(key, deadline)
    assert len(t._heap) == 1  # one entry, however often the key is re-armed
    assert t.poll(5_000, 100) == []  # the stale heap item is pushed back, not fired
    assert len(t._heap) == 1
    assert t.deadline(key) == 10_100
    assert t.poll(10_100, 100) == [key]


def test_rearming_earlier_fires_once_at_the_new_deadline() -> None:
    t: Timers[str] = Timers()
    t.schedule("k", 100)
    t.schedule("k", 50)
    assert t.next_deadline() == 50
    assert t.poll(60, 100) == ["k"]
    assert t.poll(200, 100) == []  # the orphaned item at 100 is dropped


def test_cancel_and_reschedule() -> None:
    t: Timers[str] = Timers()
    t.schedule("k", 10)
    t.cancel("k")
    t.cancel("k")  # cancelling an unknown key is a no-op
    assert t.poll(100, 100) == []
    t.schedule("k", 150)
    assert t.poll(149, 100) == []
    assert t.poll(150, 100) == ["k"]


def test_next_deadline_skips_cancelled_and_extended_items() -> None:
    t: Timers[str] = Timers()
    assert t.next_deadline() is None
    t.schedule("a", 10)
    t.schedule("b", 20)
    t.cancel("a")
    assert t.next_deadline() == 20
    t.schedule("b", 40)
    t.schedule("c", 30)
    assert t.next_deadline() == 30


def test_next_deadline_is_a_lower_bound_when_many_items_were_extended() -> None:
    t: Timers[int] = Timers()
    for key in range(1000):
        t.schedule(key, 10)
    for key in range(1000):
        t.schedule(key, 1000 + key)
    bound = t.next_deadline()
    assert bound is not None and bound <= 1000
    assert t.poll(999, 10_000) == []
    assert t.next_deadline() == 1000


def test_poll_limit_spreads_a_burst_over_several_calls() -> None:
    t: Timers[int] = Timers()
    for key in range(10):
        t.schedule(key, 5)
    assert t.poll(5, 3) == [0, 1, 2]
    deadline = t.next_deadline()
    assert deadline is not None and deadline <= 5
    assert t.poll(5, 100) == list(range(3, 10))


def test_orphans_are_compacted() -> None:
    t: Timers[int] = Timers()
    for key in range(50_000):
        t.schedule(key, 1_000_000 - key)  # far deadlines, cancelled long before they fire
        t.cancel(key)
    assert len(t) == 0
    assert len(t._heap) <= 2 * len(t) + 1024 + 1
    for key in range(10_000):
        t.schedule(key, 100)
        t.schedule(key, 50)  # earlier: orphans the first item
    assert len(t._heap) <= 2 * len(t) + 1024 + 1
    assert sorted(t.poll(100, 100_000)) == list(range(10_000))


def test_clear() -> None:
    t: Timers[str] = Timers()
    t.schedule("a", 1)
    t.clear()
    assert t.next_deadline() is None and t.poll(10, 10) == []


ops = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), st.integers(0, 7), st.integers(0, 200)),
        st.tuples(st.just("cancel"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("poll"), st.just(0), st.integers(0, 60)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_matches_a_dict_model(operations: list[tuple[str, int, int]]) -> None:
    t: Timers[int] = Timers()
    model: dict[int, int] = {}
    now = 0
    for op, key, value in operations:
        if op == "schedule":
            t.schedule(key, now + value)
            model[key] = now + value
        elif op == "cancel":
            t.cancel(key)
            model.pop(key, None)
        else:
            now += value
            due = t.poll(now, 1_000)
            expected = sorted((k for k, d in model.items() if d <= now), key=lambda k: model[k])
            assert sorted(due) == sorted(expected)
            assert [model[k] for k in due] == sorted(model[k] for k in due)  # earliest first
            for k in due:
                del model[k]
        assert len(t) == len(model)
        deadline = t.next_deadline()
        if model:
            assert deadline is not None and deadline <= min(model.values())
        else:
            assert deadline is None


def test_pop_due_returns_one_key_at_a_time() -> None:
    t: Timers[str] = Timers()
    t.schedule("a", 10)
    t.schedule("b", 10)
    key, examined = t.pop_due(10, 100)
    assert (key, examined) == ("a", 1)
    t.schedule("b", 50)  # handling "a" re-armed "b": it is no longer due
    assert t.pop_due(10, 100) == (None, 1)
    assert t.pop_due(50, 100) == ("b", 1)
    assert t.pop_due(50, 100) == (None, 0)


def test_a_key_rearmed_later_still_comes_out_in_deadline_order() -> None:
    t: Timers[str] = Timers()
    t.schedule("rearmed", 300)
    t.schedule("rearmed", 433)  # its heap item still says 300
    t.schedule("other", 426)
    assert t.poll(450, 100) == ["other", "rearmed"]


# Deadlines and steps that span many of the timers' buckets (a bucket is about a second), so that
# keys re-armed across buckets, re-armed into buckets already drained and cancelled in between are
# all exercised against the model.
wide_ops = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), st.integers(0, 11), st.integers(0, 6_000)),
        st.tuples(st.just("cancel"), st.integers(0, 11), st.just(0)),
        st.tuples(st.just("poll"), st.just(0), st.integers(0, 2_500)),
        st.tuples(st.just("peek"), st.just(0), st.just(0)),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(wide_ops)
def test_matches_a_dict_model_across_buckets(operations: list[tuple[str, int, int]]) -> None:
    t: Timers[int] = Timers()
    model: dict[int, int] = {}
    now = 0
    for op, key, value in operations:
        if op == "schedule":
            t.schedule(key, now + value)
            model[key] = now + value
        elif op == "cancel":
            t.cancel(key)
            model.pop(key, None)
        elif op == "peek":
            t.next_deadline()  # may drain a bucket ahead of time: must change nothing observable
        else:
            now += value
            due = t.poll(now, 1_000)
            expected = sorted(k for k, d in model.items() if d <= now)
            assert sorted(due) == expected
            assert [model[k] for k in due] == sorted(model[k] for k in due)  # earliest first
            for k in due:
                del model[k]
        assert len(t) == len(model)
        assert all(t.deadline(k) == d for k, d in model.items())
        deadline = t.next_deadline()
        if model:
            assert deadline is not None and deadline <= min(model.values())
        else:
            assert deadline is None


def test_a_session_fires_at_its_exact_deadline_after_crossing_buckets() -> None:
    t: Timers[str] = Timers()
    t.schedule("session", 10_000)
    for now in range(0, 60_000, 3_000):  # a heartbeat every 3 s pushes the deadline 10 s ahead
        assert t.poll(now, 100) == []
        t.schedule("session", now + 10_000)
    assert t.poll(66_999, 100) == []
    assert t.next_deadline() == 67_000
    assert t.poll(67_000, 100) == ["session"]


def test_a_key_filed_again_into_a_drained_bucket_still_comes_out_first() -> None:
    t: Timers[str] = Timers()
    t.schedule("late", 5_000)
    assert t.next_deadline() == 5_000  # its bucket is drained ahead of time
    t.schedule("early", 4_990)  # into the same, already drained, bucket
    t.schedule("earlier", 100)
    assert t.next_deadline() == 100
    assert t.poll(5_000, 100) == ["earlier", "early", "late"]


def test_a_crowded_bucket_is_drained_over_several_calls() -> None:
    """Keys loaded together expire together: their bucket is moved a chunk per call, so one call
    never walks all of them, and next_deadline() stays due until every one has come out."""
    t: Timers[int] = Timers()
    for key in range(20_000):
        t.schedule(key, 5_000)
    assert t.poll(5_000, 1_000) == []  # the first chunk is moved; the rest of it still to come
    assert 0 < len(t._due) < 20_000
    due: list[int] = []
    calls = 0
    while len(due) < 20_000:
        calls += 1
        assert calls <= 30
        due += t.poll(5_000, 1_000)
        deadline = t.next_deadline()
        assert (deadline is None) if len(due) == 20_000 else (deadline is not None and deadline <= 5_000)
    assert due == list(range(20_000))  # in the order they were armed
