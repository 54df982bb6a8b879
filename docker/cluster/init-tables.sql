-- Run by every replica's first start (/docker-entrypoint-initdb.d). Each replica creates its own copy
-- of both tables; the {shard} and {replica} macros (node-<service>.xml) make the two replicas of a
-- shard share one Keeper path, so they hold the same rows.
CREATE TABLE default.visits_local (
  user_id UInt64, region LowCardinality(String), device LowCardinality(String), age UInt8, spend Float64
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/default/visits_local', '{replica}')
ORDER BY user_id;

-- The table analysts query, on every replica (a gateway may use any): the dp: annotations are on the
-- Distributed table. Sharded by the privacy unit, so each person's rows live on one shard.
CREATE TABLE default.visits (
  user_id UInt64,
  region  LowCardinality(String) COMMENT 'dp: public, values=["north", "south", "east", "west"]',
  device  LowCardinality(String) COMMENT 'dp: public, values=["mobile", "desktop", "tablet"]',
  age     UInt8                  COMMENT 'dp: bounds=[18, 90]',
  spend   Float64                COMMENT 'dp: bounds=[0, 500]'
) ENGINE = Distributed(dpch_cluster, default, visits_local, user_id)
COMMENT 'dp: privacy_unit=user_id, max_rows_per_unit=10';
