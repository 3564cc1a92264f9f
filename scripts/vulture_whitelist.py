"""Names vulture (dead-code check, scripts/test.sh) cannot see being used: they are read by frameworks,
templates or people, not called from Python."""

# ruff: noqa
_ = object()

# Jinja templates (elastic_agent/status/templates) read these fields of the status pages' rows.
pool_state, state_for, age, job_relation, meaning, synced, next_try, fires
schedulable, operating_system, architecture, kernel_version  # the cluster report's nodes (_nodes.html)
_.total
mean_wait, p95_wait, idle_hours  # "what reuse saved" (_savings.html)

# Set on the kubernetes client's Configuration, read by the client.
_.api_key, _.api_key_prefix, _.retries, _.refresh_api_key_hook

# The kubernetes client's last response, dropped when the client is closed (kube/connect.py).
_.last_response

# Flask routes and hooks, registered by decorator (the fake GoCD admin API: tests/support/doubles/gocd_rest/admin_api.py).
healthz, livez, readyz, metrics_page
gate, plugin_info, pipeline_groups, create_pipeline, site_urls

# PyYAML's Dumper hook, overridden in elastic_agent/service/helm_values.py: read by PyYAML.
_.ignore_aliases

# waitress's hooks, overridden in elastic_agent/service/wsgi.py (the body limit): read by waitress.
_.to_response, _.parser_class, _.channel_class

# Overrides of http.server / werkzeug hooks.
_.do_GET, _.do_POST, _.log_message, _.log_request, _.close_connection, _.handle_startendtag, _.handle_endtag, _.handle_data

# The simulated GoCD server's records and statistics: what it knows, read by people and in reprs.
_.registrations_refused, _.used_at, issued_at, used_at, registrations_refused, deleted_with_live_process
_.deleted_with_live_process

# A log record's level name, set where a filter demotes it (kube/connect.py): read by log formatters.
_.levelname

# Orders the kubelet's tasks (dataclass(order=True) compares it).
seq

# pytest fixtures requested by name.
nowhere_to_connect, compacting_kube, traced, fake_stack

# pytest's hook, in each level's conftest.py (tests/<level>/conftest.py marks the level's tests).
pytest_collection_modifyitems

# The pool's state machine (tests/unit/pool/test_pool_state_machine.py): rules and invariants, run by
# Hypothesis.
_.which_pods_boot_slowly, _.schedule_jobs, _.cancel_waiting_job, _.evict_pod, _.pod_boot, _.backend_restart
_.credential_change, _.first_list_arrives, _.profile_edit, _.seconds_pass, _.minutes_pass
_.no_key_in_two_pods, _.no_job_on_two_pods, _.no_busy_pod_deleted, _.every_request_answered
_.no_idle_pod_past_its_timeout_plus_one_ping, _.bounded_state

# A tar member's time, read by tarfile when it writes the member (tests/support/agent_image.py).
_.mtime
