-- statement 1: commits to audit.sales_transactions_history (audit/sales_transactions_history)
-- txn capture_history:bronze.sales_transactions = 2
-- note: captured bronze.sales_transactions versions 0..2
INSERT INTO `delta`.`/warehouse/audit/sales_transactions_history` (`transaction_id`, `customer_id`, `product`, `quantity`, `amount`, `sold_at`, `source_file`, `load_timestamp`, `_change_type`, `_commit_version`, `_commit_timestamp`) SELECT `transaction_id`, `customer_id`, `product`, `quantity`, `amount`, `sold_at`, `source_file`, `load_timestamp`, `_change_type`, `_commit_version`, `_commit_timestamp` FROM table_changes_by_path('/warehouse/bronze/sales_transactions', 0, 2);

