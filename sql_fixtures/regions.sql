-- A public dimension table (no personal data): joined to private tables with ANY JOIN.
CREATE TABLE {table} (
  region      String,
  country     String,
  climate     String,
  population  UInt32  COMMENT 'dp: bounds=[0, 20000000]',
  area_km2    Float64 COMMENT 'dp: bounds=[0, 1000000]'
) ENGINE = MergeTree ORDER BY region
COMMENT 'dp: public'
