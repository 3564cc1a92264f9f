"""The advisor, `python -m elastic_agent advise TRACE`: which reuse settings to give each profile, found
by replaying the user's trace of jobs in the virtual-time simulator. A user feature, so a package of its
own beside the simulator it runs."""
