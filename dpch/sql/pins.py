"""The ClickHouse settings every emitted query pins, whatever the server profile or the client says.

dpch proves a query's sensitivity for one computation: each unit's first k rows, aggregated exactly,
every group present. A server profile (or a user's default settings) can change that computation
without an error: merge nothing from the shards, skip a shard, stop reading at a row limit, drop
rows a ``DELETE`` hid, return an empty result for an empty input. Each setting below is pinned in
the emitted query's own ``SETTINGS`` clause, which wins over the profile, the session and the HTTP
request; the analyst cannot name any of them (:func:`dpch.sql.settings.option_overrides`).

Every pin was measured on chdb (ClickHouse 26.9): tests/sql/test_pinned_settings.py shows the
unpinned emitted query giving a wrong exact value under the profile named there and the pinned one
the right value (or, for the ``*_overflow_mode`` pins and ``skip_unavailable_shards``, an error:
an error after the charge trips the analyst's lock, a silently wrong value would not). The
distributed ones run on two in-process shards with different data (``remote('127.0.0.1,localhost',
view(… WHERE s = shardNum()))``). docs/serving.md "Settings dpch pins" lists them for owners.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pin:
    """One pinned setting: its name, its value as ClickHouse SQL, and why dpch pins it."""

    name: str
    value: int | str
    why: str


#: the pins, in the order they are written into the emitted SQL
PINS: tuple[Pin, ...] = (
    # -- checked by the row rule (docs/design.md rule 5) and the key domain -----------------------
    Pin("join_use_nulls", 0, "a LEFT join's unmatched rows carry the column type's default, which the key "
        "domain counts on (1 would silently drop that group)"),
    Pin("use_variant_as_common_type", 0, "otherwise if(c, '', 1) is a Variant and a function over it fails "
        "only on rows taking the other branch (an error oracle); with 0 it is refused before the charge"),
    Pin("date_time_overflow_behavior", "ignore", "date arithmetic wraps or saturates; 'throw' would raise "
        "on a row's value"),
    Pin("enable_analyzer", 1, "the analyzer whose types the registry's checks ask for"),
    # -- a Distributed table or remote(): the initiator must merge, and read every shard ------------
    Pin("distributed_group_by_no_merge", 0, "1 or 2 return each shard's result unmerged: LIMIT k BY unit "
        "is not applied again at the initiator, so a unit with rows on two shards contributes 2k rows"),
    Pin("optimize_distributed_group_by_sharding_key", 0, "with optimize_skip_unused_shards, a GROUP BY or "
        "LIMIT BY over the sharding key is not merged at the initiator: wrong unless every row lies on "
        "the shard its key names, which ClickHouse never checks"),
    Pin("optimize_skip_unused_shards", 0, "a WHERE on the sharding key reads only the shard the key "
        "names: rows written elsewhere (a direct INSERT into a shard) are silently left out"),
    Pin("skip_unavailable_shards", 0, "1 answers from the shards that are up: a silently partial value"),
    Pin("max_parallel_replicas", 1, "parallel replicas split one shard's reading over its replicas; not "
        "tested with the cap, and not testable on chdb"),
    # -- limits must fail, never truncate (an error trips the lock; a cut result is just wrong) -------
    Pin("read_overflow_mode", "throw", "'break' stops reading at max_rows_to_read/max_bytes_to_read and "
        "aggregates the rows read so far"),
    Pin("read_overflow_mode_leaf", "throw", "the same at each shard (max_rows_to_read_leaf)"),
    Pin("result_overflow_mode", "throw", "'break' returns the first max_result_rows groups only"),
    Pin("timeout_overflow_mode", "throw", "'break' returns what was aggregated when max_execution_time ran "
        "out (measured: an empty result)"),
    Pin("sort_overflow_mode", "throw", "'break' stops the cap's ORDER BY at max_rows_to_sort rows"),
    Pin("group_by_overflow_mode", "throw", "'break' stops aggregating at max_rows_to_group_by keys, "
        "'any' stops adding keys"),
    Pin("set_overflow_mode", "throw", "'break' fills an IN set only up to max_rows_in_set (the groups-per-"
        "unit restriction is an IN)"),
    Pin("join_overflow_mode", "throw", "'break' builds a JOIN's right side only up to max_rows_in_join"),
    Pin("distinct_overflow_mode", "throw", "'break' stops a DISTINCT at max_rows_in_distinct (no emitted "
        "form uses DISTINCT today: pinned so none ever runs under it)"),
    # -- the result's shape ---------------------------------------------------------------------
    Pin("limit", 0, "a profile's limit keeps only the first groups of the result"),
    Pin("offset", 0, "a profile's offset drops the first groups (an ungrouped aggregate's only row)"),
    Pin("extremes", 0, "adds min and max rows to the result in text formats (dpch reads Native, which "
        "has none: pinned so no format ever mixes them with groups)"),
    Pin("aggregate_functions_null_for_empty", 0, "sum() over no rows becomes NULL instead of 0"),
    Pin("empty_result_for_aggregation_by_empty_set", 0, "an ungrouped aggregate over no rows returns no "
        "row at all instead of 0"),
    # -- which rows are the data ------------------------------------------------------------------
    Pin("transform_null_in", 0, "1 makes NULL IN (NULL) true: an analyst's filter x IN (…, NULL) then keeps "
        "the NULL rows that standard SQL (and the query dpch checked) drops"),
    Pin("apply_deleted_mask", 1, "0 reads rows a lightweight DELETE removed (a person's erased rows)"),
)

#: the pinned names (lower case), which an analyst's SETTINGS may not name
PINNED_NAMES = frozenset(pin.name.lower() for pin in PINS)

__all__ = ["PINNED_NAMES", "PINS", "Pin"]
