"""The store: :class:`~dpch.store.engine.Engine` (clickhouse-connect on a DSN, embedded chdb or a
server), identifier quoting, and cooperative cancellation of running queries. The bottom layer
above :mod:`dpch.errors`: nothing here knows about policies, SQL plans or privacy."""
