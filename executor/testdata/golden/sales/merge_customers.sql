-- statement 1: commits to sales.customer (sales/customer)
-- txn scd2_merge:sales.customer:staging.customers = 2
CREATE OR REPLACE TEMPORARY VIEW stored AS SELECT t.*, false AS __tomb FROM `delta`.`/warehouse/sales/customer` t;
WITH raw AS (SELECT * FROM (SELECT `customer_id`, `name`, `email`, `city`, `updated_at` AS __seq, (_change_type = 'delete' OR false) AS __del, _change_type = 'delete' AS __phys FROM table_changes_by_path('/warehouse/staging/customers', 0, 2) WHERE _change_type <> 'update_preimage' AND true) WHERE CASE WHEN `customer_id` IS NULL THEN raise_error('key column customer_id of staging.customers is NULL; a merge key must have a value (where: "customer_id IS NOT NULL" passes such rows)') WHEN __seq IS NULL THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`customer_id` AS STRING), 'NULL')), ': sequence_by column updated_at is null')) WHEN __phys THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`customer_id` AS STRING), 'NULL')), ': a delete row of the change feed of staging.customers with sequence_by is placed by the local fold only; run this stage with engine: local')) ELSE true END),
grp AS (SELECT `customer_id`, __seq, max(CAST(__del AS INT)) = 1 AS __del,
 count(DISTINCT CASE WHEN NOT __del THEN to_json(struct(`name`, `email`, `city`)) END) AS __n,
 first(CASE WHEN NOT __del THEN struct(`name`, `email`, `city`) END, true) AS __r,
 first(CASE WHEN NOT __del THEN to_json(struct(`name`, `email`, `city`)) END, true) AS __h
 FROM raw WHERE true GROUP BY `customer_id`, __seq),
norm AS (SELECT `customer_id`, __seq, __del, __r.`name` AS `name`, __r.`email` AS `email`, __r.`city` AS `city`, CASE WHEN __del THEN NULL ELSE __h END AS __h FROM grp
 WHERE CASE WHEN NOT __del AND __n > 1 THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`customer_id` AS STRING), 'NULL')), ': two different rows at sequence ', CAST(__seq AS STRING))) ELSE true END),
bounds AS (SELECT `customer_id`, max(`valid_from`) AS __maxfrom, max(CASE WHEN NOT `is_current` THEN `valid_to` END) AS __maxto FROM stored GROUP BY `customer_id`),
fresh AS (SELECT n.* FROM norm n LEFT ANTI JOIN stored s ON (s.`customer_id` <=> n.`customer_id`) AND s.`valid_from` = n.__seq AND NOT n.__del AND NOT s.__tomb AND (s.`name` <=> n.`name` AND s.`email` <=> n.`email` AND s.`city` <=> n.`city`)
 LEFT JOIN bounds x ON (n.`customer_id` <=> x.`customer_id`)
 WHERE CASE WHEN x.__maxfrom IS NOT NULL AND (n.__seq <= x.__maxfrom OR n.__seq <= x.__maxto)
  THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(n.`customer_id` AS STRING), 'NULL')), ': an event at ', CAST(n.__seq AS STRING), ' is at or before a version sales.customer holds (a late event that splits an interval); late events are placed by the local engine: run this stage with engine: local'))
  ELSE true END),
allev AS (SELECT `customer_id`, `name`, `email`, `city`, __seq, __del FROM fresh),
cur AS (SELECT * FROM stored WHERE `is_current`),
ordered AS (SELECT a.*, (c.`valid_from` IS NOT NULL AND NOT c.__tomb) AS __curlive, c.`name` AS c_0, c.`email` AS c_1, c.`city` AS c_2,
 row_number() OVER (PARTITION BY a.`customer_id` ORDER BY a.__seq) AS __rn
 FROM allev a LEFT JOIN cur c ON (a.`customer_id` <=> c.`customer_id`)),
prev AS (SELECT *, CASE WHEN __rn = 1 THEN __curlive ELSE NOT lag(__del) OVER w END AS __plive, CASE WHEN __rn = 1 THEN c_0 ELSE lag(`name`) OVER w END AS p_0, CASE WHEN __rn = 1 THEN c_1 ELSE lag(`email`) OVER w END AS p_1, CASE WHEN __rn = 1 THEN c_2 ELSE lag(`city`) OVER w END AS p_2
 FROM ordered WINDOW w AS (PARTITION BY `customer_id` ORDER BY __seq)),
surv AS (SELECT *, lead(__seq) OVER (PARTITION BY `customer_id` ORDER BY __seq) AS __next
 FROM prev WHERE CASE WHEN __del THEN __plive ELSE NOT __plive OR NOT (`name` <=> p_0 AND `email` <=> p_1 AND `city` <=> p_2) END),
firsts AS (SELECT `customer_id`, min(__seq) AS __close FROM surv GROUP BY `customer_id`),
latest AS (SELECT `customer_id`, max(CASE WHEN NOT __del THEN 1 ELSE 0 END) = 1 AS __hast1 FROM allev GROUP BY `customer_id`),
upd AS (SELECT l.*, f.__close FROM latest l LEFT JOIN firsts f ON (l.`customer_id` <=> f.`customer_id`)),
nv AS (SELECT s.`customer_id`, CASE WHEN s.__del THEN NULL ELSE s.`name` END AS `name`, CASE WHEN s.__del THEN NULL ELSE s.`email` END AS `email`, CASE WHEN s.__del THEN NULL ELSE s.`city` END AS `city`, s.__seq AS __from, coalesce(s.__next, TIMESTAMP '9999-12-31 00:00:00') AS __to, s.__next IS NULL AS __cur
 FROM surv s JOIN upd u ON (s.`customer_id` <=> u.`customer_id`) WHERE NOT s.__del),
src AS (
 SELECT false AS __ins, u.`customer_id`, NULL AS `name`, NULL AS `email`, NULL AS `city`, NULL AS __from, NULL AS __to, NULL AS __cur, u.__close, u.__hast1 FROM upd u
 UNION ALL
 SELECT true AS __ins, `customer_id`, `name`, `email`, `city`, __from, __to, __cur, NULL, false FROM nv)
MERGE INTO `delta`.`/warehouse/sales/customer` t USING src s ON NOT s.__ins AND (t.`customer_id` <=> s.`customer_id`)
WHEN MATCHED AND t.`is_current` AND s.__close IS NOT NULL THEN UPDATE SET `valid_to` = s.__close, `is_current` = false
WHEN NOT MATCHED AND s.__ins THEN INSERT (`customer_id`, `name`, `email`, `city`, `valid_from`, `valid_to`, `is_current`) VALUES (s.`customer_id`, s.`name`, s.`email`, s.`city`, s.__from, s.__to, s.__cur);

