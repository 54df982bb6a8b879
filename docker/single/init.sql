-- An annotated sample table: the dp: comments are dpch's privacy policy.
CREATE TABLE default.visits (
  user_id UInt64,
  region  LowCardinality(String) COMMENT 'dp: public, values=["north", "south", "east", "west"]',
  device  LowCardinality(String) COMMENT 'dp: public, values=["mobile", "desktop", "tablet"]',
  age     UInt8                  COMMENT 'dp: bounds=[18, 90]',
  spend   Float64                COMMENT 'dp: bounds=[0, 500]'
) ENGINE = MergeTree ORDER BY user_id
COMMENT 'dp: privacy_unit=user_id, max_rows_per_unit=10';

INSERT INTO default.visits
SELECT intDiv(number, 5) AS user_id,
       ['north', 'south', 'east', 'west'][number % 4 + 1] AS region,
       ['mobile', 'desktop', 'tablet'][cityHash64(number) % 3 + 1] AS device,
       18 + cityHash64(intDiv(number, 5)) % 70 AS age,
       round((cityHash64(number, 1) % 50000) / 100, 2) AS spend
FROM numbers(1000000);
