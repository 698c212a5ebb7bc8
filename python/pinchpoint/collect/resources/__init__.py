"""Sampling resources: processes, cgroups, host, links, sockets."""
