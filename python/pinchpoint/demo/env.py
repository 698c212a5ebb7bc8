"""Environment variables through which the stack tells the app where its files are and how
to behave, and the paths it loads that are not the probe's."""

DB_ENV = "PINCHPOINT_DEMO_DB"
PROBE_LOG_ENV = "PINCHPOINT_PROBE_LOG"
# A PostgreSQL connection string (libpq form); the database endpoints answer 503 without it.
PG_DSN_ENV = "PINCHPOINT_DEMO_PG"
# N: every Nth answer of `GET /api/orders/<id>` in a worker carries a wrong id (demo/journey.py).
WRONG_EVERY_ENV = "PINCHPOINT_DEMO_WRONG_EVERY"
