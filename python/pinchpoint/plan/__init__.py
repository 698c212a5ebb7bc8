"""The plan: its model, load shapes, TOML reading and errors, SLA, Prometheus options."""
