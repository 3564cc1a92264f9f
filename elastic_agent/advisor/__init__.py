"""The advisor, `python -m elastic_agent advise TRACE`: which reuse settings to give each profile, found
by replaying the user's trace of jobs in the virtual-time simulator.

Two halves. The vocabulary, `workload.py` (the trace format, generated traces), `measures.py` (a run's
result and its percentiles) and `schedule_advice.py` (schedules proposed from a trace's demand), is pure:
it imports nothing of `elastic_agent.simulation`, because the simulator imports it (it replays traces
and fills results) and so does the serving path's trace command (the percentile of real waits).
`advise.py` runs the simulator over the candidates and is the only module here that imports it;
`command.py`, the command's options, imports it only when `advise` runs. The layers contract in
pyproject.toml holds the halves apart. This file imports nothing: importing the vocabulary must not load
the rest.
"""
