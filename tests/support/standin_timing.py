"""The stand-in agent's loops shortened for tests on the fake cluster, where each pod's agent is a process.

The stand-in's own defaults are the real agent's (seconds between pings and polls); a test of a few
seconds sets them shorter through the environment the simulated kubelet gives each agent process."""

from __future__ import annotations

# The stand-in's intervals, shortened (real seconds: its defaults are GoCD's 5 s ping, 1 s to 10 s work).
FAST_AGENT = {
    "STANDIN_PING_S": "0.2",
    "STANDIN_WORK_DELAY_S": "0.05",
    "STANDIN_WORK_INTERVAL_S": "0.2",
    "STANDIN_REGISTER_RETRY_S": "0.1",
}
