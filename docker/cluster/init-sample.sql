-- Run by ch-s1r1 only, after init-tables.sql and once the three other replicas are healthy.
-- Inserted through the Distributed table: rows go to one replica of the shard of their user_id
-- (internal_replication), and ReplicatedMergeTree copies them to the other replica.
INSERT INTO default.visits
SELECT intDiv(number, 5) AS user_id,
       ['north', 'south', 'east', 'west'][number % 4 + 1] AS region,
       ['mobile', 'desktop', 'tablet'][cityHash64(number) % 3 + 1] AS device,
       18 + cityHash64(intDiv(number, 5)) % 70 AS age,
       round((cityHash64(number, 1) % 50000) / 100, 2) AS spend
FROM numbers(1000000)
SETTINGS insert_distributed_sync = 1;
