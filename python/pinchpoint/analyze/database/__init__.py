"""The database from inside, in the verdict: what the samples of a database component's
backends (db_activity.parquet) and its pg_stat_statements (db_statements.parquet) say
from the step where its limit starts: the locks waited for and the statements that wait
and hold them (`locks.py`), the statements by active time (`statements.py`), read and cut
to those steps (`samples.py`), and put in a finding's evidence (`evidence.py`)."""
