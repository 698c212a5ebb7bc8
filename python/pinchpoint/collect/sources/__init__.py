"""Where collection reads from: this host, an agent, Prometheus."""
