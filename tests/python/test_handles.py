"""The session's registry of operations in flight (syncline._handles): no job needed."""
import threading

import pytest

from syncline._handles import Handles


class _Entry:
    def __init__(self, name):
        self.name, self.op = name, None


def test_handles_are_distinct_and_waited_for_once():
    handles = Handles()
    a, b, c = (handles.add(_Entry(n)) for n in "abc")
    assert len({a, b, c}) == 3 and min(a, b, c) > 0
    assert handles.get(b).name == "b"  # left in place
    assert [e.name for e in handles.pop([c, a])] == ["c", "a"]
    with pytest.raises(ValueError, match=f"handle {a} is not an operation in flight"):
        handles.pop([a])
    assert [e.name for e in handles.pop([b])] == ["b"]


def test_a_pop_with_an_unknown_or_repeated_handle_takes_nothing():
    handles = Handles()
    a, b = handles.add(_Entry("a")), handles.add(_Entry("b"))
    with pytest.raises(ValueError, match="12345"):
        handles.pop([a, 12345])
    with pytest.raises(ValueError, match="twice"):
        handles.pop([b, b])
    with pytest.raises(ValueError, match="not an operation of this kind"):
        handles.pop([a, b], kind=int)
    assert [e.name for e in handles.pop([a, b])] == ["a", "b"]  # both still there


def test_discard_skips_unknown_handles_and_numpy_integers_are_handles():
    np = pytest.importorskip("numpy")
    handles = Handles()
    a = handles.add(_Entry("a"))
    assert [e.name for e in handles.discard([np.int64(a), 999])] == ["a"]
    assert handles.discard([a]) == []


def test_a_handle_is_never_reused_by_another_registry():
    # A session's registry after init(), shutdown(), init(): a handle an old optimizer still holds
    # must not name an operation of the new session.
    old, new = Handles(), Handles()
    kept = old.add(_Entry("old"))
    assert new.add(_Entry("new")) != kept
    with pytest.raises(ValueError, match=str(kept)):
        new.get(kept)


def test_concurrent_adds_get_distinct_handles():
    handles, got = Handles(), []
    lock = threading.Lock()

    def add_many():
        mine = [handles.add(_Entry("x")) for _ in range(2000)]
        with lock:
            got.extend(mine)

    threads = [threading.Thread(target=add_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(got) == 8000 and len(set(got)) == 8000
    assert len(handles.pop(got)) == 8000
