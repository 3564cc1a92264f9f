"""Names of the labels and annotations this plugin puts on its pods.

Labels identify (and are selected on); annotations carry state. Label values must be valid Kubernetes
label values (at most 63 characters). Nothing here ever holds a profile property or a secret.
"""

PREFIX = "reuse.gocd.org/"

# Labels: identity and selection. A pod is this backend's only when all three identity labels match.
LABEL_PLUGIN_ID = PREFIX + "plugin-id"
LABEL_SERVER_ID = PREFIX + "server-id"
LABEL_CLUSTER = PREFIX + "cluster"
LABEL_FINGERPRINT = PREFIX + "fingerprint"  # shortened reuse fingerprint
LABEL_JOB_ID = PREFIX + "job-id"  # the job the pod runs now (or was created for, until its first job)
LABEL_PIPELINE = PREFIX + "pipeline"
LABEL_JOB_NAME = PREFIX + "job-name"
# "true" while the pod runs a job, absent otherwise: the shipped PodDisruptionBudget
# (docker/kubernetes/pdb.yaml) selects on it, so that the Eviction API, which honours budgets and not the
# autoscalers' annotations, refuses to evict a busy pod. No selector of the pool's own names it.
LABEL_BUSY = PREFIX + "busy"

# Labels of the official Kubernetes plugin (cd.go.contrib.elasticagent.kubernetes), which may run in the
# same namespace while users move over. It adopts every pod of its namespace labelled
# kind=kubernetes-elastic-agent and deletes those that GoCD does not list among its own agents once they
# are older than its auto-register timeout, busy or not; an adopted pod without a numeric
# Elastic-Agent-Job-Id makes its refresh of the namespace fail instead, and with it every server-ping and
# create-agent of its cluster profile. It selects on Elastic-Agent-Created-By and Elastic-Agent-Job-Id for
# its status reports and reads Elastic-Agent-Environment-Name off the pods it adopts. So this plugin's
# pods carry none of them, not even from a template copied from one of its pods (pods.build_pod drops
# them, and a backend removes them from pods an earlier version made); dashboards select on
# LABEL_PLUGIN_ID. docs/architecture.md, "Beside the official plugin".
OFFICIAL_KIND_LABEL = "kind"
OFFICIAL_KIND_VALUE = "kubernetes-elastic-agent"
OFFICIAL_LABELS = ("Elastic-Agent-Created-By", "Elastic-Agent-Job-Id", "Elastic-Agent-Environment-Name")

# Annotations: state, kept on the pod so a restart of the backend loses nothing.
ANN_STATE = PREFIX + "state"  # booting | idle | busy | retiring
ANN_STATE_SINCE = PREFIX + "state-since"  # epoch seconds on the backend's clock, as a decimal string
ANN_CREATED_AT = PREFIX + "created-at"  # when the backend created the pod, on its own clock
ANN_CREATED_FOR = PREFIX + "created-for"  # JSON job identifier of the job the pod was created for
ANN_CURRENT_JOB = PREFIX + "current-job"  # JSON job identifier while busy
ANN_LAST_JOB = PREFIX + "last-job"  # JSON job identifier of the last job run
ANN_JOBS_RUN = PREFIX + "jobs-run"
ANN_RECENT_JOBS = PREFIX + "recent-jobs"  # JSON [[job id, "pipeline/1/stage/1/job"], ...] (job_history.py)
ANN_FINGERPRINT = PREFIX + "fingerprint"  # full fingerprint, "v1:<sha256 hex>"
ANN_ENVIRONMENT = PREFIX + "environment"  # the GoCD environment the agent registers into
ANN_RETIRE_REASON = PREFIX + "retire-reason"
ANN_REUSE = PREFIX + "reuse"  # "true" when the profile allows reuse
ANN_REGISTERED = PREFIX + "registered"  # "true" once the agent was seen by GoCD
ANN_OOM_TOLD = PREFIX + "oom-told"  # "<job id>:<container>:<restarts>" of the OOM kill told to the job
# When GoCD issued the pod's registration key, at the earliest (clock seconds; the key itself is never
# written here): GoCD's refusal of the key, or its acceptance, then says how long its keys live
# (pool/key_refusals.py, pool/key_lifetime.py).
ANN_KEY_ISSUED_AT = PREFIX + "key-issued-at"
# The pod whose refused key this pod was created to replace (key_refusals.py): it is not replaced again.
ANN_REPLACES = PREFIX + "replaces"

# Annotations for node autoscalers (a busy pod must not be disrupted).
ANN_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
ANN_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"

# Reuse knobs of the pod's profile, kept on the pod so a ping (which carries no elastic profile) and a
# restarted backend know them.
ANN_IDLE_TIMEOUT = PREFIX + "idle-timeout"  # seconds
ANN_MAX_JOBS = PREFIX + "max-jobs"  # MaxJobsPerPod, absent for no limit
ANN_MIN_IDLE = PREFIX + "min-idle"  # MinIdlePods of its fingerprint
ANN_SCHEDULE = PREFIX + "reuse-schedule"  # ReuseSchedule's canonical JSON, absent without one
ANN_WARM = PREFIX + "warm"  # "true": created ahead of demand for the warm pool
ANN_PREDICTED_FOR = PREFIX + "predicted-for"  # "<pipeline>/<stage>": started ahead for that stage (Predict)
