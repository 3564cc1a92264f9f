"""The GoCD server this project recommends for reuse, in one place: its assignment tick and how long its
registration keys live.

docs/install.md ("A GoCD server tuned for reuse") tells an administrator to set these two server
properties, the advisor's `--tuned-tick` and `--tuned-key-lifetime` default to them, and the benchmarks'
tuned rows run with them (`together.TUNED`); tests/unit/deploy/test_tuned_server_values.py holds the
guide, the advisor and the benchmarks to the same values. Kept apart from together.py, which runs
simulations, because the command line's parser (advisor/command.py) reads the defaults whatever the
command.

The key lifetime is a day, what the plugin's bank has room for (`pool.keys.MAX_KEPT_S`: past a day of
keys the oldest go, so a longer lifetime buys little more). A day spans every gap from one working
day's last jobs to the next day's first, which 12 hours do not when the last jobs end before 20:00, so
the evening's keys start the morning's warm pods. GoCD keeps its keys in an in-memory cache that drops a
key its lifetime after writing it (`EphemeralAutoRegisterKeyService`, `expireAfterWrite`), so a longer
lifetime costs the server memory for the keys no pod used, a few hundred bytes each. The tick is a
second: GoCD's `BuildAssignmentService` reloads every scheduled job's plan at each tick, so shorter ones
cost the server more work for a smaller gain.
"""

from __future__ import annotations

from elastic_agent.pool.keys import MAX_KEPT_S

TUNED_TICK_S = 1.0
TUNED_KEY_LIFETIME_S = MAX_KEPT_S
