"""The database every API of the reference server is kept in: ``Storage`` and its SQLite and
PostgreSQL backends, and the PostgreSQL change feed."""
