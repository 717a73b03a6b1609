-- statement 1: commits to current.customer (current/customer)
-- txn scd1_merge:current.customer:bronze.customer_events = 1
WITH raw AS (SELECT * FROM (SELECT `customer_id`, `name`, `email`, `city`, `event_ts` AS __seq, (_change_type = 'delete' OR coalesce((op = 'D'), false)) AS __del, _change_type = 'delete' AS __phys FROM table_changes_by_path('/warehouse/bronze/customer_events', 0, 1) WHERE _change_type <> 'update_preimage' AND true) WHERE CASE WHEN `customer_id` IS NULL THEN raise_error('key column customer_id of bronze.customer_events is NULL; a merge key must have a value (where: "customer_id IS NOT NULL" passes such rows)') WHEN __seq IS NULL THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`customer_id` AS STRING), 'NULL')), ': sequence_by column event_ts is null')) WHEN __phys THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`customer_id` AS STRING), 'NULL')), ': a delete row of the change feed of bronze.customer_events with sequence_by is placed by the local fold only; run this stage with engine: local')) ELSE true END),
grp AS (SELECT `customer_id`, __seq, max(CAST(__del AS INT)) = 1 AS __del,
 count(DISTINCT CASE WHEN NOT __del THEN to_json(struct(`name`, `email`, `city`)) END) AS __n,
 first(CASE WHEN NOT __del THEN struct(`name`, `email`, `city`) END, true) AS __r,
 first(CASE WHEN NOT __del THEN to_json(struct(`name`, `email`, `city`)) END, true) AS __h
 FROM raw WHERE true GROUP BY `customer_id`, __seq),
norm AS (SELECT `customer_id`, __seq, __del, __r.`name` AS `name`, __r.`email` AS `email`, __r.`city` AS `city`, CASE WHEN __del THEN NULL ELSE __h END AS __h FROM grp
 WHERE CASE WHEN NOT __del AND __n > 1 THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`customer_id` AS STRING), 'NULL')), ': two different rows at sequence ', CAST(__seq AS STRING))) ELSE true END),
lastev AS (SELECT * FROM (SELECT n.*, row_number() OVER (PARTITION BY n.`customer_id` ORDER BY n.__seq DESC) AS __rn FROM norm n WHERE true) WHERE __rn = 1)
MERGE INTO `delta`.`/warehouse/current/customer` t USING lastev s ON (t.`customer_id` <=> s.`customer_id`)
WHEN MATCHED AND s.__del THEN DELETE
WHEN MATCHED AND NOT s.__del AND NOT (t.`name` <=> s.`name` AND t.`email` <=> s.`email` AND t.`city` <=> s.`city`) THEN UPDATE SET `name` = s.`name`, `email` = s.`email`, `city` = s.`city`
WHEN NOT MATCHED AND NOT s.__del THEN INSERT (`customer_id`, `name`, `email`, `city`) VALUES (s.`customer_id`, s.`name`, s.`email`, s.`city`);

