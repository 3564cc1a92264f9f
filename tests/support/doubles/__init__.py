"""The doubles that only tests and benchmarks use, kept out of the shipped package (what ships is what
runs: everything of `elastic_agent` is reached by a command of `python -m elastic_agent`).

- gocd_rest/: GoCD's REST API, both the job history and config that `trace` reads and the admin API
  that `migrate-profiles` and the chart's preconfigure script call;
- harness.py: `VirtualStack`, the in-process backend, simulated server and cluster on one virtual clock;
- standin_agent.py: a stand-in GoCD agent run as a process, and the command that runs it;
- apiserver_node.py: the simulated kubelet driven through a real API server;
- fake_kube_faults.py, gocd_callback_faults.py: the fault injectors that tests pass into the fake API
  server and the callback endpoint.

The simulators the commands do run (the demo's stack, the advisor's virtual time) stay in
`elastic_agent.simulation`.
"""
