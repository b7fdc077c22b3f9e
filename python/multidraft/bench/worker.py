"""A child process that runs the timed calls, so that one call can be stopped.

A single solve can take minutes ([GR] Table 1 has cells of 200000+ ms per token) and a C++
call cannot be interrupted from Python. All timed calls therefore run, one at a time and in the
same process, in a *worker* started with ``spawn``. The parent waits at most ``max_call_s`` for a
call; past that it kills the worker (the call counts as a lower bound) and starts a new one for
the next call. The methods of one instance run back to back, with no idle wait in between (an
idle wait leaves the next call's caches cold; docs/benchmarks/python-internals.md). The worker
also caps its address space, so a runaway allocation becomes a ``MemoryError`` (reported)
instead of waking the kernel's OOM killer; a crash of the package is reported the same way.
Timings are taken inside the worker with ``time.perf_counter``; sending the instance is not
timed.

Outcomes of :meth:`Worker.run`, one per method: ``(DONE, ms, Outcome)``,
``(VALUE_ERROR, message)``, ``(FAILED, message)`` or ``(TIMEOUT, None)``.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Dict, Optional, Sequence, Tuple

import multidraft as md

from .methods import METHODS, time_ms, warm_up

DONE, VALUE_ERROR, FAILED, TIMEOUT = "done", "value_error", "failed", "timeout"

START_TIMEOUT_S = 300.0
"""Longest wait for a new worker to import multidraft and warm up."""


def default_memory_limit() -> Optional[int]:
    """80% of physical memory in bytes (None where unknown, and under AddressSanitizer, whose shadow
    memory reserves terabytes of address space: no address-space limit can hold it)."""
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        return None
    try:
        return int(0.8 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _touch(instance: tuple) -> None:
    """One untimed package call on the new (p, q), so that the first timed method does not pay
    alone for page faults and cold caches after the idle wait (docs/benchmarks/python-internals.md)."""
    md.acceptance_rate(instance[0], instance[1])


def _call(run, instance: tuple) -> Tuple:
    """One timed call as an outcome tuple."""
    try:
        elapsed, outcome = time_ms(run, *instance)
        return (DONE, elapsed, outcome)
    except ValueError as exc:
        return (VALUE_ERROR, str(exc))
    except Exception as exc:  # reported as a package error by the parent
        return (FAILED, f"{type(exc).__name__}: {exc}")


def _serve(conn, memory_limit: Optional[int]) -> None:
    """Worker main loop: for each request (instance, method names), run the methods back to back
    (no idle wait between them) and send one outcome per method as soon as it is known."""
    if memory_limit:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    warm_up(METHODS.values())
    conn.send(("ready",))
    while True:
        request = conn.recv()
        if request[0] == "stop":
            return
        _, instance, names = request
        _touch(instance)
        for name in names:
            conn.send(_call(METHODS[name].run, instance))


class Worker:
    """Runs timed method calls in a child process with a hard limit per call (a context manager)."""

    def __init__(self, max_call_s: float, memory_limit: Optional[int] = None):
        self.max_call_s = max_call_s
        self.memory_limit = memory_limit
        self._process = None
        self._conn = None

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child, self.memory_limit), daemon=True)
        self._process.start()
        child.close()
        if not self._conn.poll(START_TIMEOUT_S):
            self.close(kill=True)
            raise RuntimeError(f"benchmark worker did not start within {START_TIMEOUT_S:g} s")
        self._conn.recv()  # ("ready",)

    def _receive(self, name: str) -> Tuple:
        """The outcome of the call in progress, or TIMEOUT / FAILED after killing the worker."""
        if not self._conn.poll(self.max_call_s):
            self.close(kill=True)
            return (TIMEOUT, None)
        try:
            return self._conn.recv()
        except EOFError:
            self._process.join(5)
            code = self._process.exitcode
            self.close(kill=True)
            return (FAILED, f"the worker process died (exit code {code}) during {name!r}")

    def run(self, instance: tuple, names: Sequence[str]) -> Dict[str, Tuple]:
        """Time each method of ``names`` on ``instance`` = (p, q, n, drafts, sample seed).

        Returns one outcome per name (see the module docstring). After a timeout or a crash the
        remaining methods run in a fresh worker.
        """
        outcomes: Dict[str, Tuple] = {}
        pending = list(names)
        while pending:
            if self._process is None:
                self._start()
            self._conn.send(("run", instance, pending))
            for name in list(pending):
                outcomes[name] = self._receive(name)
                pending.remove(name)
                if self._process is None:
                    break
        return outcomes

    def close(self, kill: bool = False) -> None:
        """Stop the worker (politely unless ``kill``); a later :meth:`run` starts a new one."""
        if self._process is None:
            return
        if not kill:
            try:
                self._conn.send(("stop",))
                self._process.join(5)
            except (OSError, EOFError):
                pass
        if self._process.is_alive():
            self._process.kill()
        self._process.join()
        self._conn.close()
        self._process = self._conn = None
