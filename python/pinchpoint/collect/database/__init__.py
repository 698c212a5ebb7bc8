"""The database from inside: a PostgreSQL component's backends, the locks they wait for and
who holds them, and its statements' time, sampled while the load runs (the component's
`[component.database]`): the statement as the verdict names it (`normalize.py`), what is
asked of the server (`queries.py`), one sample as rows (`rows.py`), one server's sampling
thread (`sampler.py`) and the run's samplers and their files (`sampling.py`)."""
