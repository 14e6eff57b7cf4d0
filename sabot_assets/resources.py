"""Resources: the DuckDB store."""

import contextlib

from dagster_duckdb import DuckDBResource

from sabot.store.db import prepare
from sabot_assets.constants import STORE_PATH


def default_store() -> DuckDBResource:
    STORE_PATH.parent.mkdir(parents=True, exist_ok=True)
    return DuckDBResource(database=str(STORE_PATH))


@contextlib.contextmanager
def store_connection(store: DuckDBResource):
    """A prepared connection, opened only around SQL."""
    with store.get_connection() as con:
        yield prepare(con)
