CREATE TABLE default.visits_local (
  user_id UInt64, region LowCardinality(String), device LowCardinality(String), age UInt8, spend Float64
) ENGINE = MergeTree ORDER BY user_id;
