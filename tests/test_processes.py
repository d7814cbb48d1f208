"""Worker processes: how many, results in input order, and a dead or failing worker is an error, not a hang."""

from __future__ import annotations

import os

import pytest

from kueri.errors import KueriError
from kueri.processes import ordered_pool_map, resolve_workers, worker_pool

_offset = 0


def _set_offset(offset: int) -> None:
    global _offset
    _offset = offset


def _add(item: int, factor: int) -> int:
    return item * factor + _offset


def _die(item: int) -> int:
    if item == 3:
        os._exit(1)  # as if killed: no exception, no result
    return item


def _fail(item: int) -> int:
    if item == 3:
        raise KueriError(f"item {item} is bad")
    return item


def test_worker_count(monkeypatch):
    monkeypatch.setenv("KUERI_WORKERS", "3")
    assert resolve_workers() == 3 and resolve_workers(1) == 1
    monkeypatch.setenv("KUERI_WORKERS", "many")
    with pytest.raises(KueriError, match="KUERI_WORKERS"):
        resolve_workers()
    monkeypatch.delenv("KUERI_WORKERS")
    assert resolve_workers() == min(2, os.cpu_count() or 1)
    with pytest.raises(KueriError):
        resolve_workers(0)


def test_results_come_in_input_order_and_the_input_is_read_lazily():
    read = []

    def items():
        for i in range(40):
            read.append(i)
            yield i

    with worker_pool(2, _set_offset, 1000) as pool:
        results = ordered_pool_map(pool, _add, items(), 3, window=4)
        assert next(results) == 1000 and len(read) <= 5  # not the whole input ahead
        assert list(results) == [i * 3 + 1000 for i in range(1, 40)]


def test_a_dead_worker_is_an_error_not_a_hang():
    with pytest.raises(KueriError, match="worker process died"), worker_pool(2, _set_offset, 0) as pool:
        list(ordered_pool_map(pool, _die, range(8), window=4))


def test_a_workers_error_reaches_the_caller_as_itself():
    with pytest.raises(KueriError, match="item 3 is bad"), worker_pool(2, _set_offset, 0) as pool:
        list(ordered_pool_map(pool, _fail, range(8), window=4))
