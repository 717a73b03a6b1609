-- statement 1: commits to bronze.customer_events (bronze/customer_events)
-- txn ingest:bronze.customer_events:/examples/cdc-events/landing/events-001.csv = <mtime>
-- note: /examples/cdc-events/landing/events-001.csv: loaded into bronze.customer_events
CREATE OR REPLACE TEMPORARY VIEW orchestrator_source_0 (`customer_id` STRING, `name` STRING, `email` STRING, `city` STRING, `op` STRING, `event_ts` TIMESTAMP) USING csv OPTIONS (enforceSchema 'false', escape '"', header 'true', mode 'FAILFAST', nullValue '', path '/examples/cdc-events/landing/events-001.csv', quote '"', sep ',');
INSERT INTO `delta`.`/warehouse/bronze/customer_events` (`customer_id`, `name`, `email`, `city`, `op`, `event_ts`, `source_file`, `load_timestamp`) SELECT `customer_id`, `name`, `email`, `city`, `op`, `event_ts`, `source_file`, `load_timestamp` FROM (SELECT `customer_id`, `name`, `email`, `city`, `op`, `event_ts`, '/examples/cdc-events/landing/events-001.csv' AS `source_file`, TIMESTAMP '2026-01-16 06:00:00.000000' AS `load_timestamp` FROM orchestrator_source_0);

-- statement 2: commits to bronze.customer_events (bronze/customer_events)
-- txn ingest:bronze.customer_events:/examples/cdc-events/landing/events-002.csv = <mtime>
-- note: /examples/cdc-events/landing/events-002.csv: loaded into bronze.customer_events
CREATE OR REPLACE TEMPORARY VIEW orchestrator_source_1 (`customer_id` STRING, `name` STRING, `email` STRING, `city` STRING, `op` STRING, `event_ts` TIMESTAMP) USING csv OPTIONS (enforceSchema 'false', escape '"', header 'true', mode 'FAILFAST', nullValue '', path '/examples/cdc-events/landing/events-002.csv', quote '"', sep ',');
INSERT INTO `delta`.`/warehouse/bronze/customer_events` (`customer_id`, `name`, `email`, `city`, `op`, `event_ts`, `source_file`, `load_timestamp`) SELECT `customer_id`, `name`, `email`, `city`, `op`, `event_ts`, `source_file`, `load_timestamp` FROM (SELECT `customer_id`, `name`, `email`, `city`, `op`, `event_ts`, '/examples/cdc-events/landing/events-002.csv' AS `source_file`, TIMESTAMP '2026-01-16 06:00:00.000000' AS `load_timestamp` FROM orchestrator_source_1);

-- statement 3: commits to bronze.customer_events (bronze/customer_events)
-- txn ingest:bronze.customer_events:/examples/cdc-events/landing/events-003.csv = <mtime>
-- note: /examples/cdc-events/landing/events-003.csv: loaded into bronze.customer_events
CREATE OR REPLACE TEMPORARY VIEW orchestrator_source_2 (`customer_id` STRING, `name` STRING, `email` STRING, `city` STRING, `op` STRING, `event_ts` TIMESTAMP) USING csv OPTIONS (enforceSchema 'false', escape '"', header 'true', mode 'FAILFAST', nullValue '', path '/examples/cdc-events/landing/events-003.csv', quote '"', sep ',');
INSERT INTO `delta`.`/warehouse/bronze/customer_events` (`customer_id`, `name`, `email`, `city`, `op`, `event_ts`, `source_file`, `load_timestamp`) SELECT `customer_id`, `name`, `email`, `city`, `op`, `event_ts`, `source_file`, `load_timestamp` FROM (SELECT `customer_id`, `name`, `email`, `city`, `op`, `event_ts`, '/examples/cdc-events/landing/events-003.csv' AS `source_file`, TIMESTAMP '2026-01-16 06:00:00.000000' AS `load_timestamp` FROM orchestrator_source_2);

