"""The pod pool of one cluster: its state, the decisions taken over it, and the one component that
carries those decisions out against Kubernetes and GoCD."""
