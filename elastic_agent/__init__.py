"""Backend of the GoCD elastic-agent plugin that runs build agents as reusable Kubernetes pods."""

PLUGIN_ID = "cd.go.contrib.elasticagent.kubernetes-reuse"
__version__ = "0.1.0"
