"""Cluster mode: the runtime, the controller and the metadata cache (docs/replication.md)."""
