-- statement 1: commits to audit.readings_history (audit/readings_history)
-- txn capture_history:raw.readings = 1
-- note: captured raw.readings versions 0..1
INSERT INTO `delta`.`/warehouse/audit/readings_history` (`sensor`, `celsius`, `read_at`, `source_file`, `load_timestamp`, `_change_type`, `_commit_version`, `_commit_timestamp`) SELECT `sensor`, `celsius`, `read_at`, `source_file`, `load_timestamp`, `_change_type`, `_commit_version`, `_commit_timestamp` FROM table_changes_by_path('/warehouse/raw/readings', 0, 1);

