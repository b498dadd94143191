"""Kubernetes API adapter (official client): implements ClusterPort."""
