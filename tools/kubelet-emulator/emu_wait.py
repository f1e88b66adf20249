# SPDX-License-Identifier: Apache-2.0
"""Waiting for a condition of an emulator's state, shared by the device-plugin and DRA emulators."""
import time


def wait_on(cond, predicate, timeout, what, who):
    """Blocks until predicate() is true, re-checking whenever cond is notified and every 50 ms;
    returns its value. TimeoutError "<who>: timed out after T s waiting for <what>" otherwise (what
    defaults to the predicate's name)."""
    deadline = time.monotonic() + timeout
    with cond:
        while True:
            value = predicate()
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{who}: timed out after {timeout:g} s waiting for "
                                   f"{what or getattr(predicate, '__name__', 'condition')}")
            cond.wait(min(left, 0.05))
