"""Traces and what a run of one measured: the trace format users fill from their own history and the
generators of realistic ones (workload.py, pipelines.py), a run's result and its percentiles
(measures.py), and schedules proposed from a trace's demand (schedule_advice.py). The simulator replays
traces and fills results, the advisor compares them and `trace` writes them: all three stand on this
package, which imports none of them."""
