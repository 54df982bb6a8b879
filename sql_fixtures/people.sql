-- A census-like table: exactly one row per person (unique_units: no contribution cap needed).
CREATE TABLE {table} (
  person_id       UInt64,
  sex             LowCardinality(String) COMMENT 'dp: public, values=["f", "m", "x"]',
  region          LowCardinality(String) COMMENT 'dp: public, values=["north", "south", "east", "west"]',
  birth_date      Date32                 COMMENT 'dp: bounds=["1925-01-01", "2010-12-31"]',
  age             UInt8                  COMMENT 'dp: bounds=[16, 100]',
  income          Float64                COMMENT 'dp: bounds=[0, 250000]',
  household_size  UInt8                  COMMENT 'dp: bounds=[1, 8]',
  employed        UInt8                  COMMENT 'dp: bounds=[0, 1]',
  occupation      String,
  postcode        String
) ENGINE = MergeTree ORDER BY person_id
COMMENT 'dp: privacy_unit=person_id, unique_units, max_groups_per_unit=1'
