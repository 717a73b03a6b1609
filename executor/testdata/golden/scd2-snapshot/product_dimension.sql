-- statement 1: commits to dim.product (dim/product)
-- txn scd2_merge:dim.product:staging.products = 1
CREATE OR REPLACE TEMPORARY VIEW stored AS SELECT t.*, (t.`description` IS NULL AND t.`price` IS NULL) AS __tomb FROM `delta`.`/warehouse/dim/product` t;
WITH raw AS (SELECT * FROM (SELECT `sku`, `description`, `price`, TIMESTAMP '2026-01-16 06:00:01.000000' AS __seq, false AS __del FROM `delta`.`/warehouse/staging/products` VERSION AS OF 1 WHERE true) WHERE CASE WHEN `sku` IS NULL THEN raise_error('key column sku of staging.products is NULL; a merge key must have a value (where: "sku IS NOT NULL" passes such rows)') WHEN __seq IS NULL THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`sku` AS STRING), 'NULL')), ': sequence_by column  is null')) ELSE true END),
grp AS (SELECT `sku`, __seq, max(CAST(__del AS INT)) = 1 AS __del,
 count(DISTINCT CASE WHEN NOT __del THEN to_json(struct(`description`, `price`)) END) AS __n,
 first(CASE WHEN NOT __del THEN struct(`description`, `price`) END, true) AS __r,
 first(CASE WHEN NOT __del THEN to_json(struct(`description`, `price`)) END, true) AS __h
 FROM raw WHERE true GROUP BY `sku`, __seq),
norm AS (SELECT `sku`, __seq, __del, __r.`description` AS `description`, __r.`price` AS `price`, CASE WHEN __del THEN NULL ELSE __h END AS __h FROM grp
 WHERE CASE WHEN NOT __del AND __n > 1 THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(`sku` AS STRING), 'NULL')), ': two different rows at sequence ', CAST(__seq AS STRING))) ELSE true END),
bounds AS (SELECT `sku`, max(`valid_from`) AS __maxfrom, max(CASE WHEN NOT `is_current` THEN `valid_to` END) AS __maxto FROM stored GROUP BY `sku`),
fresh AS (SELECT n.* FROM norm n LEFT ANTI JOIN stored s ON (s.`sku` <=> n.`sku`) AND s.`valid_from` = n.__seq AND NOT n.__del AND NOT s.__tomb AND (s.`description` <=> n.`description` AND s.`price` <=> n.`price`)
 LEFT JOIN bounds x ON (n.`sku` <=> x.`sku`)
 WHERE CASE WHEN x.__maxfrom IS NOT NULL AND (n.__seq <= x.__maxfrom OR n.__seq <= x.__maxto)
  THEN raise_error(concat('key ', concat_ws(', ', coalesce(CAST(n.`sku` AS STRING), 'NULL')), ': an event at ', CAST(n.__seq AS STRING), ' is at or before a version dim.product holds (a late event that splits an interval); late events are placed by the local engine: run this stage with engine: local'))
  ELSE true END),
gone AS (SELECT c.`sku`, NULL AS `description`, NULL AS `price`, CASE WHEN c.`valid_from` < TIMESTAMP '2026-01-16 06:00:01.000000' THEN TIMESTAMP '2026-01-16 06:00:01.000000' ELSE TIMESTAMP '2026-01-16 06:00:01.000000' END AS __seq, true AS __del FROM stored c LEFT ANTI JOIN norm n ON (n.`sku` <=> c.`sku`)
 WHERE c.`is_current` AND NOT c.__tomb AND (c.`valid_from` < TIMESTAMP '2026-01-16 06:00:01.000000' OR c.`valid_from` < TIMESTAMP '2026-01-16 06:00:01.000000')),
allev AS (SELECT `sku`, `description`, `price`, __seq, __del FROM fresh UNION ALL SELECT `sku`, `description`, `price`, __seq, __del FROM gone),
cur AS (SELECT * FROM stored WHERE `is_current`),
ordered AS (SELECT a.*, (c.`valid_from` IS NOT NULL AND NOT c.__tomb) AS __curlive, c.`price` AS c_0,
 row_number() OVER (PARTITION BY a.`sku` ORDER BY a.__seq) AS __rn
 FROM allev a LEFT JOIN cur c ON (a.`sku` <=> c.`sku`)),
prev AS (SELECT *, CASE WHEN __rn = 1 THEN __curlive ELSE NOT lag(__del) OVER w END AS __plive, CASE WHEN __rn = 1 THEN c_0 ELSE lag(`price`) OVER w END AS p_0
 FROM ordered WINDOW w AS (PARTITION BY `sku` ORDER BY __seq)),
surv AS (SELECT *, lead(__seq) OVER (PARTITION BY `sku` ORDER BY __seq) AS __next
 FROM prev WHERE CASE WHEN __del THEN __plive ELSE NOT __plive OR NOT (`price` <=> p_0) END),
firsts AS (SELECT `sku`, min(__seq) AS __close FROM surv GROUP BY `sku`),
latest AS (SELECT `sku`, max(CASE WHEN NOT __del THEN 1 ELSE 0 END) = 1 AS __hast1, max_by(CASE WHEN NOT __del THEN `description` END, CASE WHEN NOT __del THEN __seq END) AS `description` FROM allev GROUP BY `sku`),
upd AS (SELECT l.*, f.__close FROM latest l LEFT JOIN firsts f ON (l.`sku` <=> f.`sku`)),
nv AS (SELECT s.`sku`, CASE WHEN s.__del THEN NULL WHEN u.__hast1 THEN u.`description` ELSE s.`description` END AS `description`, CASE WHEN s.__del THEN NULL ELSE s.`price` END AS `price`, s.__seq AS __from, coalesce(s.__next, TIMESTAMP '9999-12-31 00:00:00') AS __to, s.__next IS NULL AS __cur
 FROM surv s JOIN upd u ON (s.`sku` <=> u.`sku`) WHERE true),
src AS (
 SELECT false AS __ins, u.`sku`, NULL AS `description`, NULL AS `price`, NULL AS __from, NULL AS __to, NULL AS __cur, u.__close, u.__hast1, u.`description` AS `__t1_description` FROM upd u
 UNION ALL
 SELECT true AS __ins, `sku`, `description`, `price`, __from, __to, __cur, NULL, false, NULL AS `__t1_description` FROM nv)
MERGE INTO `delta`.`/warehouse/dim/product` t USING src s ON NOT s.__ins AND (t.`sku` <=> s.`sku`)
WHEN MATCHED AND t.`is_current` AND s.__close IS NOT NULL THEN UPDATE SET `valid_to` = s.__close, `is_current` = false, `description` = CASE WHEN s.__hast1 AND NOT (t.`description` IS NULL AND t.`price` IS NULL) THEN s.`__t1_description` ELSE t.`description` END
WHEN MATCHED AND (s.__hast1 AND NOT (t.`description` IS NULL AND t.`price` IS NULL) AND (NOT (t.`description` <=> s.`__t1_description`))) THEN UPDATE SET `description` = s.`__t1_description`
WHEN NOT MATCHED AND s.__ins THEN INSERT (`sku`, `description`, `price`, `valid_from`, `valid_to`, `is_current`) VALUES (s.`sku`, s.`description`, s.`price`, s.__from, s.__to, s.__cur);

