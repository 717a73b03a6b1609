-- statement 1: commits to raw.events (raw/events)
-- conf spark.databricks.delta.retentionDurationCheck.enabled = false
-- note: raw.events: deleted 2 files (2048 bytes), retention 1h30m0s
VACUUM `delta`.`/warehouse/raw/events` RETAIN 1.5 HOURS;

-- statement 2: commits to silver.orders (silver/orders)
-- note: silver.orders: deleted 1 files (512 bytes), retention 200h0m30s; keeps what capture_history orders_history still needs from version 7
VACUUM `delta`.`/warehouse/silver/orders` RETAIN 200.008333 HOURS;

-- notes: gold.daily: deleted 0 files (0 bytes), retention 168h0m0s
