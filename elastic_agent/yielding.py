"""How the backend's background threads share the interpreter with the request threads.

A background thread (the annotation writer, the console-line sender) is usually woken by a request
thread that is still answering, often should-assign-work inside GoCD's server-wide assignment lock.
Taking the GIL at once would hold that answer back for a whole background call (JSON and HTTP, a few
milliseconds); waiting a moment first lets the answer go out. Real time on purpose, not the injected
clock: it yields the processor, it does not measure anything.
"""

from __future__ import annotations

import time

LINGER_S = 0.005


def let_the_answer_go_first() -> None:
    time.sleep(LINGER_S)
