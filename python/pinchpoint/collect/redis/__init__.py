"""Redis from inside: a component's `[component.redis]` server sampled while the load
runs: its protocol (`resp.py`), INFO's text as values (`info.py`) and one server's sampling
thread (`sampler.py`). The run's samplers are started and written with the databases'
(collect/database/sampling.py)."""
