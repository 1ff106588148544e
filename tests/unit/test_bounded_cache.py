"""BoundedCache: the one bounded map (validator memos, rule memo, dedupe, throttle)."""

from __future__ import annotations

import pytest

from proxy.support.bounded_cache import BoundedCache


def test_it_never_holds_more_than_its_cap_and_evicts_the_oldest_first():
    cache: BoundedCache[str, int] = BoundedCache(3)
    for number, key in enumerate("abcde"):
        cache.put(key, number)
    assert len(cache) == 3 and list(cache) == ["c", "d", "e"]
    assert cache.get("a") is None and cache.get("e") == 4


def test_putting_a_held_key_again_makes_it_the_newest():
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 3)
    cache.put("c", 4)
    assert list(cache) == ["a", "c"] and cache.get("a") == 3


def test_touch_makes_a_held_key_the_newest_and_says_whether_it_was_held():
    cache: BoundedCache[str, None] = BoundedCache(2)
    cache.put("a", None)
    cache.put("b", None)
    assert cache.touch("a") is True and cache.touch("z") is False
    cache.put("c", None)
    assert "a" in cache and "b" not in cache


def test_get_does_not_change_the_order():
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert list(cache) == ["b", "c"]


def test_pop_forgets_a_key():
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    assert cache.pop("a") == 1 and cache.pop("a") is None and len(cache) == 0


def test_a_cap_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        BoundedCache(0)
