-- The demo table: website visits, several rows per person. `{table}` is replaced by the
-- fully qualified table name when loaded.
CREATE TABLE {table} (
  user_id      UInt64,
  visit_date   Date                   COMMENT 'dp: bounds=["2026-01-01", "2026-12-31"]',
  region       LowCardinality(String) COMMENT 'dp: public, values=["north", "south", "east", "west"]',
  device       LowCardinality(String) COMMENT 'dp: public, values=["mobile", "desktop", "tablet"]',
  age          UInt8                  COMMENT 'dp: bounds=[18, 90]',
  duration_min Float64                COMMENT 'dp: bounds=[0, 120]',
  spend        Float64                COMMENT 'dp: bounds=[0, 500]',
  pages        UInt16                 COMMENT 'dp: bounds=[1, 50]',
  converted    UInt8
) ENGINE = MergeTree ORDER BY (user_id, visit_date)
COMMENT 'dp: privacy_unit=user_id, max_rows_per_unit=10'
