"""The status pages GoCD shows for the plugin, a cluster and an agent: what the pool, the cluster and the
forecast know, rendered as HTML. They sit above the pool and the forecast, which know nothing of them."""
