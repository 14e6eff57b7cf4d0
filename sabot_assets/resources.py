"""Resources: the DuckDB store."""

import contextlib

from dagster_duckdb import DuckDBResource

from sabot.store.db import open_store, prepare
from sabot_assets.constants import STORE_PATH


def default_store() -> DuckDBResource:
    STORE_PATH.parent.mkdir(parents=True, exist_ok=True)
    return DuckDBResource(database=str(STORE_PATH))


@contextlib.contextmanager
def store_connection(store: DuckDBResource):
    """A prepared connection, opened only around SQL. It waits on a held lock for a bounded,
    configurable time (`open_store`) instead of dagster-duckdb's fixed ~100 s loop."""
    con = open_store(store.database, config={"custom_user_agent": "dagster", **store.connection_config})
    try:
        yield prepare(con)
    finally:
        con.close()
