package executor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/orchestrator-io/orchestrator/jobs"
)

// The SQL of a merge on Spark: one MERGE per batch with the stage's txn. The batch's
// events are folded in SQL by the rules of the local fold for events after everything
// the target holds (STAGES.md scd2_merge 1-3, 5, 8): deletes ignored or not, several
// events per key in sequence order, exact repeats dropped, a delete winning a tie, two
// different rows at one key and sequence refused, no-op upserts (null-safe <=> on the
// tracked columns) dropped, type 1 columns set on every version of the key. A batch
// event at or before one of its key's stored versions (a late event that would split
// an interval) is refused with a clear error, as is a delete row of the change feed
// with sequence_by (its placement needs the local fold): such a stage runs on the local
// engine. The MERGE applies the result with the merge-key union pattern: one source row
// per key matches every stored version of the key (closing the current one at the
// first change, setting type 1 values), and one row per new version, which matches
// nothing, is inserted.

// sentinel is valid_to of current versions.
const sentinel = "TIMESTAMP '9999-12-31 00:00:00'"

// events renders the CTEs raw (one row per source event: data columns, __seq, __del)
// through norm (one row per key and sequence after ties), shared by both merge kinds.
func (e *SparkExecutor) events(p *jobs.Plan, deletesOn bool) (string, error) {
	m := p.Merge
	seq, err := seqExpr(m)
	if err != nil {
		return "", err
	}
	del := "false"
	if m.DeleteWhen != "" {
		del = "coalesce((" + m.DeleteWhen + "), false)"
	}
	keyText := keyTextExpr(m.Keys, "")
	where := "true"
	if m.Where != "" {
		where = "coalesce((" + m.Where + "), false)"
	}
	nullKeys := ""
	for _, k := range m.Keys {
		nullKeys += fmt.Sprintf("WHEN %s IS NULL THEN raise_error('key column %s of %s is NULL; a merge key must have a value (where: \"%s IS NOT NULL\" passes such rows)') ",
			ident(k), strings.ReplaceAll(k, "'", ""), strings.ReplaceAll(m.Source.Name, "'", ""), strings.ReplaceAll(k, "'", ""))
	}
	var raw string
	deleted, phys := "_change_type = 'delete'", "_change_type = 'delete'"
	if m.SourceChanges && len(m.SnapshotTimes) > 0 {
		// A snapshot load's deletes, and without sequence_by its rows, are at the time
		// it recorded; its deletes are no deletes of source rows to place.
		asOf := snapshotTimes(m.SnapshotTimes)
		phys += " AND " + asOf + " IS NULL"
		if m.SequenceBy == "" {
			seq = "coalesce(" + asOf + ", " + seq + ")"
		} else {
			seq = "CASE WHEN " + deleted + " AND " + asOf + " IS NOT NULL THEN " + asOf + " ELSE " + seq + " END"
		}
	}
	if m.SourceChanges {
		guard := fmt.Sprintf("CASE %sWHEN __seq IS NULL THEN raise_error(concat('key ', %s, ': sequence_by column %s is null')) ", nullKeys, keyText, strings.ReplaceAll(m.SequenceBy, "'", ""))
		if m.SequenceBy != "" {
			guard += fmt.Sprintf("WHEN __phys THEN raise_error(concat('key ', %s, ': a delete row of the change feed of %s with sequence_by is placed by the local fold only; run this stage with engine: local')) ", keyText, m.Source.Name)
		}
		guard += "ELSE true END"
		raw = fmt.Sprintf("raw AS (SELECT * FROM (SELECT %s, %s AS __seq, (%s OR %s) AS __del, %s AS __phys FROM table_changes_by_path(%s, %d, %d) WHERE _change_type <> 'update_preimage' AND %s) WHERE %s)",
			idents(m.Data, ""), seq, deleted, del, phys, str(e.path(m.Source)), m.From, m.Through, where, guard)
	} else {
		guard := fmt.Sprintf("CASE %sWHEN __seq IS NULL THEN raise_error(concat('key ', %s, ': sequence_by column %s is null')) ELSE true END", nullKeys, keyText, strings.ReplaceAll(m.SequenceBy, "'", ""))
		raw = fmt.Sprintf("raw AS (SELECT * FROM (SELECT %s, %s AS __seq, %s AS __del FROM %s VERSION AS OF %d WHERE %s) WHERE %s)",
			idents(m.Data, ""), seq, del, e.tableRef(m.Source), m.Through, where, guard)
	}
	keep := "true"
	if !deletesOn {
		keep = "NOT __del"
	}
	nonKey := without(m.Data, m.Keys)
	row := "struct(" + idents(nonKey, "") + ")"
	if len(nonKey) == 0 {
		row = "struct(1)"
	}
	grp := fmt.Sprintf(`grp AS (SELECT %s, __seq, max(CAST(__del AS INT)) = 1 AS __del,
 count(DISTINCT CASE WHEN NOT __del THEN to_json(%s) END) AS __n,
 first(CASE WHEN NOT __del THEN %s END, true) AS __r,
 first(CASE WHEN NOT __del THEN to_json(%s) END, true) AS __h
 FROM raw WHERE %s GROUP BY %s, __seq)`, idents(m.Keys, ""), row, row, row, keep, idents(m.Keys, ""))
	var cols []string
	for _, c := range nonKey {
		cols = append(cols, "__r."+ident(c)+" AS "+ident(c))
	}
	if len(cols) == 0 {
		cols = []string{"1 AS __unused"}
	}
	name := "norm"
	if m.PriorFrom >= 0 {
		name = "norm0"
	}
	norm := fmt.Sprintf(`%s AS (SELECT %s, __seq, __del, %s, CASE WHEN __del THEN NULL ELSE __h END AS __h FROM grp
 WHERE CASE WHEN NOT __del AND __n > 1 THEN raise_error(concat('key ', %s, ': two different rows at sequence ', CAST(__seq AS STRING))) ELSE true END)`,
		name, idents(m.Keys, ""), strings.Join(cols, ", "), keyText)
	out := raw + ",\n" + grp + ",\n" + norm
	if m.PriorFrom >= 0 {
		// The events merged before (the source's feed through From-1): a batch event
		// equal to one of them changes nothing and is dropped; one at or before another
		// of its key's merged events is late (it may fall between events the target
		// kept no trace of) and is refused.
		joinK := func(a, b string) string { return nullSafeEq(m.Keys, a, b) }
		out += fmt.Sprintf(`,
prior AS (SELECT %s, %s AS __seq, (_change_type = 'delete' OR %s) AS __del,
 CASE WHEN _change_type = 'delete' OR %s THEN NULL ELSE to_json(%s) END AS __h
 FROM table_changes_by_path(%s, %d, %d) WHERE _change_type <> 'update_preimage' AND %s),
priorkept AS (SELECT * FROM prior WHERE %s),
latep AS (SELECT DISTINCT %s, n.__seq FROM norm0 n JOIN priorkept p ON %s
 AND (p.__seq > n.__seq OR (p.__seq = n.__seq AND NOT (p.__del = n.__del AND p.__h <=> n.__h)))),
norm AS (SELECT n.* FROM norm0 n LEFT ANTI JOIN priorkept p ON %s AND p.__seq = n.__seq AND p.__del = n.__del AND p.__h <=> n.__h
 LEFT JOIN latep l ON %s AND l.__seq = n.__seq
 WHERE CASE WHEN l.__seq IS NOT NULL THEN raise_error(concat('key ', %s, ': an event at ', CAST(n.__seq AS STRING), ' is at or before an event of the key merged before (a late event); late events are placed by the local engine with its event log: run this stage with engine: local')) ELSE true END)`,
			idents(m.Keys, ""), seq, del, del, row, str(e.path(m.Source)), m.PriorFrom, m.From-1, where, keep,
			idents(m.Keys, "n."), joinK("n.", "p."), joinK("n.", "p."), joinK("n.", "l."), keyTextExpr(m.Keys, "n."))
	}
	return out, nil
}

// snapshotTimes is the time a snapshot load recorded in the change feed row's commit
// (NULL for other commits).
func snapshotTimes(times map[int64]time.Time) string {
	versions := make([]int64, 0, len(times))
	for v := range times {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	pairs := make([]string, len(versions))
	for i, v := range versions {
		pairs[i] = fmt.Sprintf("%d, %s", v, tsLiteral(times[v]))
	}
	return "element_at(map(" + strings.Join(pairs, ", ") + "), _commit_version)"
}

// seqExpr is the sequence of a source row (a timestamp for scd2_merge).
func seqExpr(m *jobs.MergePlan) (string, error) {
	if m.SequenceBy == "" {
		if m.SourceChanges {
			return "_commit_timestamp", nil
		}
		return tsLiteral(m.SourceTime), nil
	}
	col := ident(m.SequenceBy)
	switch m.SequenceType {
	case "timestamp":
		return col, nil
	case "timestamp_ntz", "date":
		return "CAST(" + col + " AS TIMESTAMP)", nil
	case "long", "integer", "short", "byte":
		return "CAST(" + col + " AS BIGINT)", nil
	}
	return "", fmt.Errorf("sequence_by column %s is %s; expected a timestamp, a date or an integer", m.SequenceBy, m.SequenceType)
}

func keyTextExpr(keys []string, prefix string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = "coalesce(CAST(" + prefix + ident(k) + " AS STRING), 'NULL')"
	}
	return "concat_ws(', ', " + strings.Join(parts, ", ") + ")"
}

func without(all, drop []string) []string {
	var out []string
	for _, c := range all {
		if !contains(drop, c) {
			out = append(out, c)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// nullSafeEq is a null-safe equality of columns on two sides (true for none).
func nullSafeEq(cols []string, a, b string) string {
	if len(cols) == 0 {
		return "true"
	}
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = a + ident(c) + " <=> " + b + ident(c)
	}
	return "(" + strings.Join(parts, " AND ") + ")"
}

// scd2SQL is the MERGE of one scd2_merge batch.
func (e *SparkExecutor) scd2SQL(p *jobs.Plan) ([]statement, error) {
	m := p.Merge
	if m.SequenceBy != "" && m.SequenceType != "timestamp" && m.SequenceType != "timestamp_ntz" && m.SequenceType != "date" {
		return nil, fmt.Errorf("sequence_by column %s is %s; expected a timestamp or a date (it becomes %s)", m.SequenceBy, m.SequenceType, m.ValidFrom)
	}
	evs, err := e.events(p, m.Deletes != "ignore")
	if err != nil {
		return nil, err
	}
	K := m.Keys
	N := without(m.Data, K)
	from, to, cur := ident(m.ValidFrom), ident(m.ValidTo), ident(m.IsCurrent)
	tomb := "false"
	if m.Deletes == "tombstone" && len(N) > 0 {
		parts := make([]string, len(N))
		for i, c := range N {
			parts[i] = "t." + ident(c) + " IS NULL"
		}
		tomb = "(" + strings.Join(parts, " AND ") + ")"
	}
	joinK := func(a, b string) string { return nullSafeEq(K, a, b) }
	var b strings.Builder
	b.WriteString("WITH " + evs + ",\n")
	// The stored versions: a repeat of a stored version's start (all its values) changes
	// nothing; any other event at or before a stored bound of its key is late.
	// The stored rows are a view, not a CTE: a CTE over the MERGE target used several
	// times is not read as a Delta table by Spark ("Table does not support reads").
	stored := fmt.Sprintf("CREATE OR REPLACE TEMPORARY VIEW stored AS SELECT t.*, %s AS __tomb FROM %s t", tomb, e.tableRef(m.Target))
	fmt.Fprintf(&b, `bounds AS (SELECT %s, max(%s) AS __maxfrom, max(CASE WHEN NOT %s THEN %s END) AS __maxto FROM stored GROUP BY %s),
fresh AS (SELECT n.* FROM norm n LEFT ANTI JOIN stored s ON %s AND s.%s = n.__seq AND NOT n.__del AND NOT s.__tomb AND %s
 LEFT JOIN bounds x ON %s
 WHERE CASE WHEN x.__maxfrom IS NOT NULL AND (n.__seq <= x.__maxfrom OR n.__seq <= x.__maxto)
  THEN raise_error(concat('key ', %s, ': an event at ', CAST(n.__seq AS STRING), ' is at or before a version %s holds (a late event that splits an interval); late events are placed by the local engine: run this stage with engine: local'))
  ELSE true END),
`, idents(K, ""), from, cur, to, idents(K, ""),
		joinK("s.", "n."), from, nullSafeEq(N, "s.", "n."), joinK("n.", "x."), keyTextExpr(K, "n."), m.Target.Name)
	if !m.SourceChanges && m.Deletes != "ignore" {
		// Keys of current rows the snapshot lacks are deleted at the source version's time.
		sel := make([]string, len(m.Data))
		for i, c := range m.Data {
			if contains(K, c) {
				sel[i] = "c." + ident(c)
			} else {
				sel[i] = "NULL AS " + ident(c)
			}
		}
		// They are deleted as of the snapshot's time (with sequence_by its newest value);
		// a key whose current version is not older than that, at the source's commit time.
		asOf := tsLiteral(m.SourceTime)
		if m.SequenceBy != "" {
			asOf = "coalesce((SELECT max(__seq) FROM raw), " + asOf + ")"
		}
		fmt.Fprintf(&b, `gone AS (SELECT %s, CASE WHEN c.%s < %s THEN %s ELSE %s END AS __seq, true AS __del FROM stored c LEFT ANTI JOIN norm n ON %s
 WHERE c.%s AND NOT c.__tomb AND (c.%s < %s OR c.%s < %s)),
allev AS (SELECT %s, __seq, __del FROM fresh UNION ALL SELECT %s, __seq, __del FROM gone),
`, strings.Join(sel, ", "), from, asOf, asOf, tsLiteral(m.SeenTime), joinK("n.", "c."), cur, from, asOf, from, tsLiteral(m.SeenTime), idents(m.Data, ""), idents(m.Data, ""))
	} else {
		fmt.Fprintf(&b, "allev AS (SELECT %s, __seq, __del FROM fresh),\n", idents(m.Data, ""))
	}
	scd2Survivors(&b, m)
	scd2Versions(&b, m)
	e.scd2Merge(&b, m, tomb)
	return []statement{{setup: []string{stored}, sql: b.String(), table: m.Target, txn: p.Txn}}, nil
}

// scd2Survivors writes the CTEs of the events of allev that change something: cur (the
// current stored rows), ordered and prev (the state before each event: the previous
// event, or for the first the current row, live when it exists and is no tombstone),
// and surv (a delete of a live row, an upsert of a dead one or of other tracked values),
// each with the sequence of its key's next (__next).
func scd2Survivors(b *strings.Builder, m *jobs.MergePlan) {
	K, T := m.Keys, m.Tracked
	from, cur := ident(m.ValidFrom), ident(m.IsCurrent)
	prevTracked := make([]string, len(T))
	for i, c := range T {
		prevTracked[i] = fmt.Sprintf("CASE WHEN __rn = 1 THEN c_%d ELSE lag(%s) OVER w END AS p_%d", i, ident(c), i)
	}
	curCols := make([]string, len(T))
	for i, c := range T {
		curCols[i] = fmt.Sprintf("c.%s AS c_%d", ident(c), i)
	}
	same := make([]string, len(T))
	for i, c := range T {
		same[i] = fmt.Sprintf("%s <=> p_%d", ident(c), i)
	}
	sameAll := "true"
	if len(same) > 0 {
		sameAll = "(" + strings.Join(same, " AND ") + ")"
	}
	curSel := ""
	if len(curCols) > 0 {
		curSel = ", " + strings.Join(curCols, ", ")
	}
	prevSel := ""
	if len(prevTracked) > 0 {
		prevSel = ", " + strings.Join(prevTracked, ", ")
	}
	fmt.Fprintf(b, `cur AS (SELECT * FROM stored WHERE %s),
ordered AS (SELECT a.*, (c.%s IS NOT NULL AND NOT c.__tomb) AS __curlive%s,
 row_number() OVER (PARTITION BY %s ORDER BY a.__seq) AS __rn
 FROM allev a LEFT JOIN cur c ON %s),
prev AS (SELECT *, CASE WHEN __rn = 1 THEN __curlive ELSE NOT lag(__del) OVER w END AS __plive%s
 FROM ordered WINDOW w AS (PARTITION BY %s ORDER BY __seq)),
surv AS (SELECT *, lead(__seq) OVER (PARTITION BY %s ORDER BY __seq) AS __next
 FROM prev WHERE CASE WHEN __del THEN __plive ELSE NOT __plive OR NOT %s END),
`, cur, from, curSel, idents(K, "a."), nullSafeEq(K, "a.", "c."), prevSel, idents(K, ""), idents(K, ""), sameAll)
}

// scd2Versions writes the CTEs of the MERGE's source, src, from surv: per key one row
// (upd) with where the first surviving change closes the current row and the newest
// upsert's type 1 values, which go on every version; and one row per new version (nv):
// each surviving upsert, and in tombstone mode each surviving delete.
func scd2Versions(b *strings.Builder, m *jobs.MergePlan) {
	K, T1 := m.Keys, m.Type1
	joinK := func(a, b string) string { return nullSafeEq(K, a, b) }
	t1Sel := ""
	for _, c := range T1 {
		t1Sel += fmt.Sprintf(", max_by(CASE WHEN NOT __del THEN %s END, CASE WHEN NOT __del THEN __seq END) AS %s", ident(c), ident(c))
	}
	fmt.Fprintf(b, `firsts AS (SELECT %s, min(__seq) AS __close FROM surv GROUP BY %s),
latest AS (SELECT %s, max(CASE WHEN NOT __del THEN 1 ELSE 0 END) = 1 AS __hast1%s FROM allev GROUP BY %s),
upd AS (SELECT l.*, f.__close FROM latest l LEFT JOIN firsts f ON %s),
`, idents(K, ""), idents(K, ""), idents(K, ""), t1Sel, idents(K, ""), joinK("l.", "f."))
	nvCols := make([]string, 0, len(m.Data))
	for _, c := range m.Data {
		switch {
		case contains(T1, c):
			nvCols = append(nvCols, fmt.Sprintf("CASE WHEN s.__del THEN NULL WHEN u.__hast1 THEN u.%s ELSE s.%s END AS %s", ident(c), ident(c), ident(c)))
		case contains(K, c):
			nvCols = append(nvCols, "s."+ident(c))
		default:
			nvCols = append(nvCols, fmt.Sprintf("CASE WHEN s.__del THEN NULL ELSE s.%s END AS %s", ident(c), ident(c)))
		}
	}
	insWhere := "NOT s.__del"
	if m.Deletes == "tombstone" {
		insWhere = "true"
	}
	fmt.Fprintf(b, `nv AS (SELECT %s, s.__seq AS __from, coalesce(s.__next, %s) AS __to, s.__next IS NULL AS __cur
 FROM surv s JOIN upd u ON %s WHERE %s),
src AS (
 SELECT false AS __ins, %s, NULL AS __from, NULL AS __to, NULL AS __cur, u.__close, u.__hast1%s FROM upd u
 UNION ALL
 SELECT true AS __ins, %s, __from, __to, __cur, NULL, false%s FROM nv)
`, strings.Join(nvCols, ", "), sentinel, joinK("s.", "u."), insWhere,
		updateRowData(m.Data, K, "u."), t1List(T1, "u."),
		idents(m.Data, ""), t1List(T1, "NULL AS __t1_"))
}

// scd2Merge writes the MERGE of src into the target: a key's row matches every stored
// version of its key (closing the current one, setting type 1 values on all but
// tombstones, tomb: the condition of a stored tombstone); a new version matches nothing
// and inserts.
func (e *SparkExecutor) scd2Merge(b *strings.Builder, m *jobs.MergePlan, tomb string) {
	K, T1 := m.Keys, m.Type1
	to, cur := ident(m.ValidTo), ident(m.IsCurrent)
	on := "NOT s.__ins AND " + nullSafeEq(K, "t.", "s.")
	t1Set := ""
	t1Differs := "false"
	if len(T1) > 0 {
		var sets, diffs []string
		for _, c := range T1 {
			sets = append(sets, fmt.Sprintf("%s = CASE WHEN s.__hast1 AND NOT %s THEN s.%s ELSE t.%s END", ident(c), tomb, ident("__t1_"+c), ident(c)))
			diffs = append(diffs, fmt.Sprintf("NOT (t.%s <=> s.%s)", ident(c), ident("__t1_"+c)))
		}
		t1Set = ", " + strings.Join(sets, ", ")
		t1Differs = fmt.Sprintf("(s.__hast1 AND NOT %s AND (%s))", tomb, strings.Join(diffs, " OR "))
	}
	insCols := append(append([]string(nil), m.Data...), m.ValidFrom, m.ValidTo, m.IsCurrent)
	insVals := idents(m.Data, "s.") + ", s.__from, s.__to, s.__cur"
	fmt.Fprintf(b, "MERGE INTO %s t USING src s ON %s\nWHEN MATCHED AND t.%s AND s.__close IS NOT NULL THEN UPDATE SET %s = s.__close, %s = false%s\n",
		e.tableRef(m.Target), on, cur, to, cur, t1Set)
	if len(T1) > 0 {
		sets := make([]string, len(T1))
		for i, c := range T1 {
			sets[i] = ident(c) + " = s." + ident("__t1_"+c)
		}
		fmt.Fprintf(b, "WHEN MATCHED AND %s THEN UPDATE SET %s\n", t1Differs, strings.Join(sets, ", "))
	}
	fmt.Fprintf(b, "WHEN NOT MATCHED AND s.__ins THEN INSERT (%s) VALUES (%s)", idents(insCols, ""), insVals)
}

// updateRowData lists the data columns of an update row: its key, NULL elsewhere.
func updateRowData(data, keys []string, prefix string) string {
	out := make([]string, len(data))
	for i, c := range data {
		if contains(keys, c) {
			out[i] = prefix + ident(c)
		} else {
			out[i] = "NULL AS " + ident(c)
		}
	}
	return strings.Join(out, ", ")
}

func t1List(t1 []string, expr string) string {
	s := ""
	for _, c := range t1 {
		if strings.HasPrefix(expr, "NULL") {
			s += ", NULL AS " + ident("__t1_"+c)
		} else {
			s += ", " + expr + ident(c) + " AS " + ident("__t1_"+c)
		}
	}
	return s
}

// scd1SQL is the MERGE of one scd1_merge batch: the last event of each key decides (a
// delete deletes the row, an upsert that differs from the stored row, null-safe,
// replaces or inserts it); with a snapshot source that deletes, rows whose key the
// snapshot lacks are deleted. Keys with an event at or before the highest sequence
// merged before are refused (the local engine decides them with its event log).
func (e *SparkExecutor) scd1SQL(p *jobs.Plan) ([]statement, error) {
	m := p.Merge
	evs, err := e.events(p, m.Deletes == "delete")
	if err != nil {
		return nil, err
	}
	K := m.Keys
	N := without(m.Data, K)
	late := "true"
	if m.Watermark != nil {
		w := fmt.Sprint(*m.Watermark)
		if m.SequenceBy == "" || m.SequenceType == "timestamp" || m.SequenceType == "timestamp_ntz" || m.SequenceType == "date" {
			w = "timestamp_micros(" + w + ")"
		}
		late = fmt.Sprintf("CASE WHEN n.__seq <= %s THEN raise_error(concat('key ', %s, ': an event at ', CAST(n.__seq AS STRING), ' is at or before the last merge of %s (a late event); late events are decided by the local engine with its event log: run this stage with engine: local')) ELSE true END",
			w, keyTextExpr(K, "n."), m.Target.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `WITH %s,
lastev AS (SELECT * FROM (SELECT n.*, row_number() OVER (PARTITION BY %s ORDER BY n.__seq DESC) AS __rn FROM norm n WHERE %s) WHERE __rn = 1)
MERGE INTO %s t USING lastev s ON %s
WHEN MATCHED AND s.__del THEN DELETE
`, evs, idents(K, "n."), late, e.tableRef(m.Target), nullSafeEq(K, "t.", "s."))
	if len(N) > 0 {
		sets := make([]string, len(N))
		for i, c := range N {
			sets[i] = ident(c) + " = s." + ident(c)
		}
		fmt.Fprintf(&b, "WHEN MATCHED AND NOT s.__del AND NOT %s THEN UPDATE SET %s\n", nullSafeEq(N, "t.", "s."), strings.Join(sets, ", "))
	}
	fmt.Fprintf(&b, "WHEN NOT MATCHED AND NOT s.__del THEN INSERT (%s) VALUES (%s)", idents(m.Data, ""), idents(m.Data, "s."))
	if !m.SourceChanges && m.Deletes == "delete" {
		b.WriteString("\nWHEN NOT MATCHED BY SOURCE THEN DELETE")
	}
	return []statement{{sql: b.String(), table: m.Target, txn: p.Txn}}, nil
}
