package executor

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/delta"
	"github.com/orchestrator-io/orchestrator/delta/expr"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// captureSQL: INSERT INTO the history table the source's change feed over (a, b],
// with the capture txn in the same commit.
func (e *SparkExecutor) captureSQL(p *jobs.Plan) ([]statement, error) {
	c := p.Capture
	var cols, problems []string
	feed := append(append([]*delta.StructField(nil), c.Source.Schema.Fields...),
		&delta.StructField{Name: delta.ChangeTypeColumn, Type: &delta.PrimitiveType{Name: delta.TypeString}},
		&delta.StructField{Name: delta.CommitVersionColumn, Type: &delta.PrimitiveType{Name: delta.TypeLong}},
		&delta.StructField{Name: delta.CommitTimestampColumn, Type: &delta.PrimitiveType{Name: delta.TypeTimestamp}})
	for _, f := range feed {
		h := c.Target.Schema.Field(f.Name)
		switch {
		case h == nil:
			problems = append(problems, fmt.Sprintf("source column %s (%s) is missing from the history table (declare it; schema_evolution runs on the local engine only)", f.Name, f.Type))
		case h.Type.String() != f.Type.String():
			problems = append(problems, fmt.Sprintf("column %s is %s in the source but %s in the history table", f.Name, f.Type, h.Type))
		default:
			cols = append(cols, h.Name)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("history table %s does not fit source %s: %s", c.Target.Name, c.Source.Name, strings.Join(problems, "; "))
	}
	where := ""
	if c.IgnoreDeletes {
		where = " WHERE " + ident(delta.ChangeTypeColumn) + " <> 'delete'"
	}
	sql := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM table_changes_by_path(%s, %d, %d)%s",
		e.tableRef(c.Target), idents(cols, ""), idents(cols, ""), str(e.path(c.Source)), c.From, c.Through, where)
	return []statement{{sql: sql, table: c.Target, txn: p.Txn, note: fmt.Sprintf("captured %s versions %d..%d", c.Source.Name, c.From, c.Through)}}, nil
}

// vacuumSQL: VACUUM ... RETAIN n HOURS per table that has files to delete (the local
// dry run made while planning says which; a table with none is left alone, so its
// history gets no VACUUM START/END, as with the local engine). A dry run sends nothing.
func (e *SparkExecutor) vacuumSQL(p *jobs.Plan, env *jobs.Env) ([]statement, error) {
	var out []statement
	for _, vt := range p.Vacuum.Tables {
		verb := "deleted"
		if p.Vacuum.DryRun {
			verb = "would delete"
		}
		note := fmt.Sprintf("%s: %s %d files (%d bytes), retention %s", vt.Table.Name, verb, len(vt.WouldDelete), vt.Bytes, vt.Retain)
		if vt.KeepFrom >= 0 {
			note += fmt.Sprintf("; keeps what %s still needs from version %d", vt.KeepFor, vt.KeepFrom)
		}
		if p.Vacuum.DryRun || len(vt.WouldDelete) == 0 {
			p.Result.Notes = append(p.Result.Notes, note)
			if p.Vacuum.DryRun {
				for _, f := range vt.WouldDelete {
					p.Result.Notes = append(p.Result.Notes, "  "+f)
				}
			}
			continue
		}
		// Whole seconds, rounded up: Spark keeps at least what the plan keeps.
		hours := math.Ceil(vt.Retain.Seconds()) / 3600
		conf := map[string]string{}
		if vt.Force || vt.Retain < 168*time.Hour {
			// The plan checked the table's retention (force was given where it is shorter).
			conf[confRetention] = "false"
		}
		out = append(out, statement{
			sql:   fmt.Sprintf("VACUUM %s RETAIN %s HOURS", e.tableRef(vt.Table), strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.6f", hours), "0"), ".")),
			table: vt.Table, conf: conf, note: note,
		})
	}
	return out, nil
}

// ingestSQL: one statement per new file, each committing the file's txn (the same
// appId and version the local stage records), so either engine skips what the other
// loaded. Append mode INSERTs, upsert mode MERGEs by the keys (null-safe), deleting
// where delete_when holds. What Spark cannot do as the local stage does is refused.
func (e *SparkExecutor) ingestSQL(p *jobs.Plan) ([]statement, error) {
	ip := p.Ingest
	if err := e.checkIngest(ip); err != nil {
		return nil, err
	}
	cols, err := ingestColumnsOf(ip)
	if err != nil {
		return nil, err
	}
	var out []statement
	for i, f := range ip.Files {
		loc, err := e.cfg.Locate(f.Name)
		if err != nil {
			return nil, fmt.Errorf("locate %s: %w", f.Name, err)
		}
		view := fmt.Sprintf("orchestrator_source_%d", i)
		setup, err := readFile(view, f.Format, loc, cols.file, ip.CSV)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		src := fmt.Sprintf("SELECT %s, %s AS %s, %s AS %s", idents(cols.data, ""), str(f.Name), ident(ip.SourceFileColumn), tsLiteral(ip.LoadTime), ident(ip.LoadTimestampColumn))
		if cols.deleteExpr != "" {
			src += ", " + cols.deleteExpr + " AS __delete"
		}
		src += " FROM " + view
		txn := &jobs.PlanTxn{Table: ip.Target, AppID: f.TxnID, Version: f.TxnVersion}
		var sql string
		if ip.Mode == "upsert" {
			sql = e.upsertSQL(ip, f.Name, src, cols)
		} else {
			sql = fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM (%s)", e.tableRef(ip.Target), idents(cols.all, ""), idents(cols.all, ""), src)
		}
		out = append(out, statement{setup: []string{setup}, sql: sql, table: ip.Target, txn: txn, about: f.Name, note: fmt.Sprintf("%s: loaded into %s", f.Name, ip.Target.Name)})
	}
	return out, nil
}

// checkIngest refuses, all reasons at once, an ingest Spark cannot run as the local
// stage does.
func (e *SparkExecutor) checkIngest(ip *jobs.IngestPlan) error {
	var refuse []string
	if e.cfg.Locate == nil {
		refuse = append(refuse, "the executor has no way to locate source files")
	}
	if ip.Mode == "snapshot" {
		refuse = append(refuse, "mode: snapshot (its deletes of absent keys need the whole run's files at once)")
	}
	if ip.SequenceBy != "" {
		refuse = append(refuse, "sequence_by")
	}
	if ip.OnError != "fail" {
		refuse = append(refuse, "on_error: "+ip.OnError+" (Spark cannot name the file, line and column of a bad record)")
	}
	if ip.AllowMissingColumns {
		refuse = append(refuse, "allow_missing_columns")
	}
	if ip.CSV.TimestampFormat != "" || ip.CSV.TimeZone != "" {
		refuse = append(refuse, "csv.timestamp_format and csv.timezone")
	}
	for _, f := range ip.Files {
		if strings.HasPrefix(f.Name, "http://") || strings.HasPrefix(f.Name, "https://") {
			refuse = append(refuse, "URL sources")
			break
		}
	}
	if len(refuse) > 0 {
		return fmt.Errorf("ingest into %s cannot run on spark: %s; run this stage with engine: local", ip.Target.Name, strings.Join(refuse, ", "))
	}
	return nil
}

// ingestColumns are the columns every file's statement of an ingest names.
type ingestColumns struct {
	// file are the columns read from a file: every target column but the lineage ones,
	// plus the columns delete_when reads that the table lacks (as strings, as the local
	// stage reads them).
	file []*delta.StructField
	data []string // the target's columns but the lineage ones
	all  []string // data, then the source file and load timestamp columns
	// deleteExpr is delete_when as a boolean that is never null ("": no delete_when).
	deleteExpr string
}

// ingestColumnsOf is the columns of an ingest's statements.
func ingestColumnsOf(ip *jobs.IngestPlan) (ingestColumns, error) {
	var c ingestColumns
	for _, f := range ip.Target.Schema.Fields {
		if strings.EqualFold(f.Name, ip.SourceFileColumn) || strings.EqualFold(f.Name, ip.LoadTimestampColumn) {
			continue
		}
		c.file = append(c.file, f)
	}
	if ip.DeleteWhen != "" {
		pred, err := expr.Parse(ip.DeleteWhen)
		if err != nil {
			return c, fmt.Errorf("delete_when %q: %w", ip.DeleteWhen, err)
		}
		for _, col := range expr.Columns(pred) {
			if ip.Target.Schema.Field(col) == nil {
				c.file = append(c.file, &delta.StructField{Name: col, Type: &delta.PrimitiveType{Name: delta.TypeString}, Nullable: true})
			}
		}
		c.deleteExpr = "coalesce((" + ip.DeleteWhen + "), false)"
	}
	for _, f := range ip.Target.Schema.Fields {
		if !strings.EqualFold(f.Name, ip.SourceFileColumn) && !strings.EqualFold(f.Name, ip.LoadTimestampColumn) {
			c.data = append(c.data, f.Name)
		}
	}
	c.all = append(append([]string(nil), c.data...), ip.SourceFileColumn, ip.LoadTimestampColumn)
	return c, nil
}

// upsertSQL is the MERGE of an upsert of file's rows (the query src) by the keys,
// null-safe: a key twice in the file is an error, as with the local stage; a matched row
// updates (or deletes, where delete_when holds), another inserts.
func (e *SparkExecutor) upsertSQL(ip *jobs.IngestPlan, file, src string, cols ingestColumns) string {
	on := make([]string, len(ip.Keys))
	for j, k := range ip.Keys {
		on[j] = "t." + ident(k) + " <=> s." + ident(k)
	}
	guard := fmt.Sprintf("SELECT * FROM (SELECT *, count(*) OVER (PARTITION BY %s) AS __n FROM (%s)) WHERE CASE WHEN __n > 1 THEN raise_error(concat('%s: key ', concat_ws(', ', %s), ' occurs more than once (set sequence_by to order its rows)')) ELSE true END",
		idents(ip.Keys, ""), src, strings.ReplaceAll(file, "'", ""), idents(ip.Keys, ""))
	set := make([]string, len(cols.all))
	for j, c := range cols.all {
		set[j] = ident(c) + " = s." + ident(c)
	}
	matched := "WHEN MATCHED THEN UPDATE SET " + strings.Join(set, ", ")
	notMatched := fmt.Sprintf("WHEN NOT MATCHED THEN INSERT (%s) VALUES (%s)", idents(cols.all, ""), idents(cols.all, "s."))
	if cols.deleteExpr != "" {
		matched = "WHEN MATCHED AND s.__delete THEN DELETE " + matched
		notMatched = fmt.Sprintf("WHEN NOT MATCHED AND NOT s.__delete THEN INSERT (%s) VALUES (%s)", idents(cols.all, ""), idents(cols.all, "s."))
	}
	return fmt.Sprintf("MERGE INTO %s t USING (%s) s ON %s %s %s", e.tableRef(ip.Target), guard, strings.Join(on, " AND "), matched, notMatched)
}

// readFile is the statement that makes a temporary view over one source file, read
// in the given schema with the options the local decoder takes. Parsing is strict
// (FAILFAST): a bad record fails the statement.
func readFile(view, format, path string, cols []*delta.StructField, csv jobs.CSVOptions) (string, error) {
	schema := make([]string, len(cols))
	for i, c := range cols {
		t, err := sparkType(c.Type)
		if err != nil {
			return "", fmt.Errorf("column %s: %w", c.Name, err)
		}
		schema[i] = ident(c.Name) + " " + t
	}
	opts := map[string]string{"mode": "FAILFAST", "path": path}
	switch format {
	case "csv":
		opts["header"] = "true"
		if csv.Header != nil && !*csv.Header {
			opts["header"] = "false"
		}
		opts["sep"] = or(csv.Delimiter, ",")
		opts["quote"] = or(csv.Quote, `"`)
		opts["escape"] = or(csv.Quote, `"`)
		opts["nullValue"] = csv.NullString
		// Spark maps CSV columns by position: make it check the header against the
		// declared order, so a file with other columns fails instead of shifting values.
		opts["enforceSchema"] = "false"
	case "ndjson":
		format = "json"
	case "parquet":
	default:
		return "", fmt.Errorf("format %q cannot be read on spark", format)
	}
	var o []string
	for _, k := range sortedKeys(opts) {
		o = append(o, k+" "+str(opts[k]))
	}
	return fmt.Sprintf("CREATE OR REPLACE TEMPORARY VIEW %s (%s) USING %s OPTIONS (%s)", view, strings.Join(schema, ", "), format, strings.Join(o, ", ")), nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sparkType is a Delta type in Spark SQL.
func sparkType(t delta.DataType) (string, error) {
	switch t.String() {
	case delta.TypeLong:
		return "BIGINT", nil
	case delta.TypeInteger:
		return "INT", nil
	case delta.TypeShort:
		return "SMALLINT", nil
	case delta.TypeByte:
		return "TINYINT", nil
	}
	if _, ok := t.(*delta.PrimitiveType); ok || strings.HasPrefix(t.String(), "decimal") {
		return strings.ToUpper(t.String()), nil
	}
	return "", fmt.Errorf("type %s cannot be read from files on spark", t)
}
