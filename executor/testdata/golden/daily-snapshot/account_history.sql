-- statement 1: commits to dim.account (dim/account)
-- txn scd2_merge:dim.account:staging.accounts = 1
CREATE OR REPLACE TEMPORARY VIEW stored AS SELECT t.*, false AS __tomb FROM `delta`.`/warehouse/dim/account` t;
WITH raw AS (SELECT * FROM (SELECT `account_id`, `name`, `plan`, `seats`, coalesce(element_at(map(1, TIMESTAMP '2026-01-14 00:00:00.000000'), _commit_version), _commit_timestamp) AS __seq, (_change_type = 'delete' OR false) AS __del, _change_type = 'delete' AND element_at(map(1, TIMESTAMP '2026-01-14 00:00:00.000000'), _commit_version) IS NULL AS __phys FROM table_changes_by_path('/warehouse/staging/accounts', 0, 1) WHERE _change_type <> 'update_preimage' AND true) WHERE CASE WHEN `account_id` IS NULL THEN raise_error('key column account_id of staging.accounts is NULL; a merge key must have a value (where: "account_id IS NOT NULL" passes such rows)') WHEN __seq IS NULL THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`account_id` AS STRING), 'NULL')), ': sequence_by column  is null')) ELSE true END),
grp AS (SELECT `account_id`, __seq, max(CAST(__del AS INT)) = 1 AS __del,
 count(DISTINCT CASE WHEN NOT __del THEN to_json(struct(`name`, `plan`, `seats`)) END) AS __n,
 first(CASE WHEN NOT __del THEN struct(`name`, `plan`, `seats`) END, true) AS __r,
 first(CASE WHEN NOT __del THEN to_json(struct(`name`, `plan`, `seats`)) END, true) AS __h
 FROM raw WHERE true GROUP BY `account_id`, __seq),
norm AS (SELECT `account_id`, __seq, __del, __r.`name` AS `name`, __r.`plan` AS `plan`, __r.`seats` AS `seats`, CASE WHEN __del THEN NULL ELSE __h END AS __h FROM grp
 WHERE CASE WHEN NOT __del AND __n > 1 THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`account_id` AS STRING), 'NULL')), ': two different rows at sequence ', CAST(__seq AS STRING))) ELSE true END),
bounds AS (SELECT `account_id`, max(`valid_from`) AS __maxfrom, max(CASE WHEN NOT `is_current` THEN `valid_to` END) AS __maxto FROM stored GROUP BY `account_id`),
fresh AS (SELECT n.* FROM norm n LEFT ANTI JOIN stored s ON (s.`account_id` <=> n.`account_id`) AND s.`valid_from` = n.__seq AND NOT n.__del AND NOT s.__tomb AND (s.`name` <=> n.`name` AND s.`plan` <=> n.`plan` AND s.`seats` <=> n.`seats`)
 LEFT JOIN bounds x ON (n.`account_id` <=> x.`account_id`)
 WHERE CASE WHEN x.__maxfrom IS NOT NULL AND (n.__seq <= x.__maxfrom OR n.__seq <= x.__maxto)
  THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(n.`account_id` AS STRING), 'NULL')), ': an event at ', CAST(n.__seq AS STRING), ' is at or before a version dim.account holds (a late event that splits an interval); late events are placed by the local engine: run this stage with engine: local'))
  ELSE true END),
allev AS (SELECT `account_id`, `name`, `plan`, `seats`, __seq, __del FROM fresh),
cur AS (SELECT * FROM stored WHERE `is_current`),
ordered AS (SELECT a.*, (c.`valid_from` IS NOT NULL AND NOT c.__tomb) AS __curlive, c.`plan` AS c_0, c.`seats` AS c_1,
 row_number() OVER (PARTITION BY a.`account_id` ORDER BY a.__seq) AS __rn
 FROM allev a LEFT JOIN cur c ON (a.`account_id` <=> c.`account_id`)),
prev AS (SELECT *, CASE WHEN __rn = 1 THEN __curlive ELSE NOT lag(__del) OVER w END AS __plive, CASE WHEN __rn = 1 THEN c_0 ELSE lag(`plan`) OVER w END AS p_0, CASE WHEN __rn = 1 THEN c_1 ELSE lag(`seats`) OVER w END AS p_1
 FROM ordered WINDOW w AS (PARTITION BY `account_id` ORDER BY __seq)),
surv AS (SELECT *, lead(__seq) OVER (PARTITION BY `account_id` ORDER BY __seq) AS __next
 FROM prev WHERE CASE WHEN __del THEN __plive ELSE NOT __plive OR NOT (`plan` <=> p_0 AND `seats` <=> p_1) END),
firsts AS (SELECT `account_id`, min(__seq) AS __close FROM surv GROUP BY `account_id`),
latest AS (SELECT `account_id`, max(CASE WHEN NOT __del THEN 1 ELSE 0 END) = 1 AS __hast1, max_by(CASE WHEN NOT __del THEN `name` END, CASE WHEN NOT __del THEN __seq END) AS `name` FROM allev GROUP BY `account_id`),
upd AS (SELECT l.*, f.__close FROM latest l LEFT JOIN firsts f ON (l.`account_id` <=> f.`account_id`)),
nv AS (SELECT s.`account_id`, CASE WHEN s.__del THEN NULL WHEN u.__hast1 THEN u.`name` ELSE s.`name` END AS `name`, CASE WHEN s.__del THEN NULL ELSE s.`plan` END AS `plan`, CASE WHEN s.__del THEN NULL ELSE s.`seats` END AS `seats`, s.__seq AS __from, coalesce(s.__next, TIMESTAMP '9999-12-31 00:00:00') AS __to, s.__next IS NULL AS __cur
 FROM surv s JOIN upd u ON (s.`account_id` <=> u.`account_id`) WHERE NOT s.__del),
src AS (
 SELECT false AS __ins, u.`account_id`, NULL AS `name`, NULL AS `plan`, NULL AS `seats`, NULL AS __from, NULL AS __to, NULL AS __cur, u.__close, u.__hast1, u.`name` AS `__t1_name` FROM upd u
 UNION ALL
 SELECT true AS __ins, `account_id`, `name`, `plan`, `seats`, __from, __to, __cur, NULL, false, NULL AS `__t1_name` FROM nv)
MERGE INTO `delta`.`/warehouse/dim/account` t USING src s ON NOT s.__ins AND (t.`account_id` <=> s.`account_id`)
WHEN MATCHED AND t.`is_current` AND s.__close IS NOT NULL THEN UPDATE SET `valid_to` = s.__close, `is_current` = false, `name` = CASE WHEN s.__hast1 AND NOT false THEN s.`__t1_name` ELSE t.`name` END
WHEN MATCHED AND (s.__hast1 AND NOT false AND (NOT (t.`name` <=> s.`__t1_name`))) THEN UPDATE SET `name` = s.`__t1_name`
WHEN NOT MATCHED AND s.__ins THEN INSERT (`account_id`, `name`, `plan`, `seats`, `valid_from`, `valid_to`, `is_current`) VALUES (s.`account_id`, s.`name`, s.`plan`, s.`seats`, s.__from, s.__to, s.__cur);

