package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/internal/arrowx"
	pqfile "github.com/orchestrator-io/orchestrator/internal/parquet"
)

// Picking (ScanOptions.Pick): a batch's columns are read step by step, each step's at
// the rows the steps before kept, the rest at the rows the last kept. The Parquet
// reader copies out only those rows' values (internal/parquet's ReadColumn), so a scan
// that keeps few rows of a wide table decodes most of it no further than its pages.

// bindPick resolves the steps' columns to indexes in s.work.
func (s *Scanner) bindPick() error {
	if len(s.opts.Pick) == 0 {
		return nil
	}
	if !s.opts.FilesOnly {
		return errors.New("scan: Pick needs FilesOnly")
	}
	s.pick = make([][]int, len(s.opts.Pick))
	for k, st := range s.opts.Pick {
		if st.Keep == nil {
			return fmt.Errorf("scan: Pick step %d has no Keep", k)
		}
		for _, name := range st.Columns {
			i := -1
			for j := range s.out.Fields() {
				if strings.EqualFold(s.work[j].Name, name) {
					i = j
				}
			}
			if i < 0 {
				return fmt.Errorf("scan: Pick step %d: column %s is not returned by the scan", k, name)
			}
			s.pick[k] = append(s.pick[k], i)
		}
	}
	return nil
}

// readPicked is read for a scan with Pick.
func (f *fileScan) readPicked(ctx context.Context, s *Scanner) (arrow.RecordBatch, position, error) {
	if f.rgs == nil { // no data column in the file: its records come whole
		for {
			rec, at, err := f.readWhole(ctx, s)
			if rec == nil || err != nil {
				return rec, at, err
			}
			rows := make([]int64, rec.NumRows())
			for r := range rows {
				rows[r] = at.first + int64(r)
			}
			kept, at, err := f.pickFrom(ctx, s, rec, at, rows)
			if err != nil || kept != nil {
				return kept, at, err
			}
		}
	}
	if f.fan == nil {
		f.fan = f.pickRowGroups(ctx, s)
	}
	rec, rows, st, err := f.fan.next()
	f.stats.add(st)
	if err != nil || rec == nil {
		return nil, position{}, err
	}
	return rec, position{file: f.add, first: rows[0], rows: rows}, nil
}

// rowGroupFanOut reads the row groups of a file with Pick on several goroutines, at
// most GOMAXPROCS at once, and hands their records over in row group order. A row
// group's reader keeps what it picked until its turn: few rows, when the steps keep
// few. Its owner stops it (stop), which releases what is left.
type rowGroupFanOut struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	out    []chan pickedGroup // per row group, its records
	slots  chan struct{}      // one per row group read or held
	taken  int                // row groups handed over (the next one's index)
	cur    pickedGroup        // its records not handed over yet
}

// pickedGroup is what reading one row group picked: its records with each row's place
// in the file, what reading it counted, and the error that ended it.
type pickedGroup struct {
	recs  []arrow.RecordBatch
	rows  [][]int64
	stats ScanStats
	err   error
}

func (f *fileScan) pickRowGroups(ctx context.Context, s *Scanner) *rowGroupFanOut {
	ctx, cancel := context.WithCancel(ctx)
	workers := max(1, runtime.GOMAXPROCS(0))
	p := &rowGroupFanOut{cancel: cancel, out: make([]chan pickedGroup, len(f.rgs)), slots: make(chan struct{}, workers)}
	for k := range p.out {
		p.out[k] = make(chan pickedGroup, 1)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for k, rg := range f.rgs {
			select {
			case p.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				g := f.pickRowGroup(ctx, s, rg)
				select {
				case p.out[k] <- g:
				case <-ctx.Done():
					g.release()
				}
			}()
		}
	}()
	return p
}

// next returns the next record picked, nil at the end, with what reading its row group
// counted (once, with its first record).
func (p *rowGroupFanOut) next() (arrow.RecordBatch, []int64, ScanStats, error) {
	var st ScanStats
	for len(p.cur.recs) == 0 {
		if p.taken == len(p.out) {
			return nil, nil, st, nil
		}
		g := <-p.out[p.taken]
		p.out[p.taken] = nil
		p.taken++
		<-p.slots
		st.add(g.stats)
		if g.err != nil {
			g.release()
			return nil, nil, st, g.err
		}
		p.cur = g
	}
	rec, rows := p.cur.recs[0], p.cur.rows[0]
	p.cur.recs, p.cur.rows = p.cur.recs[1:], p.cur.rows[1:]
	return rec, rows, st, nil
}

// stop cancels the readers, waits for them and releases what they picked.
func (p *rowGroupFanOut) stop() {
	p.cancel()
	p.wg.Wait()
	p.cur.release()
	for _, ch := range p.out {
		if ch == nil {
			continue
		}
		select { // (each reader sends once, to a buffer of one)
		case g := <-ch:
			g.release()
		default:
		}
	}
}

func (g *pickedGroup) release() {
	arrowx.ReleaseRecords(g.recs)
	g.recs, g.rows = nil, nil
}

// pickRowGroup reads row group rg batch by batch, step by step.
func (f *fileScan) pickRowGroup(ctx context.Context, s *Scanner, rg int) (g pickedGroup) {
	cols, err := f.open([]int{rg})
	if err != nil {
		g.err = fmt.Errorf("scan %s: %w", f.add.Path, err)
		return g
	}
	defer cols.Release()
	// The group's first row, in the file and counting the rows the deletion vector keeps.
	md := f.fr.ParquetReader().MetaData()
	var phys int64
	for k := range rg {
		phys += md.RowGroup(k).NumRows()
	}
	kept := phys
	if f.dv != nil && phys > 0 {
		below := int64(f.dv.Rank(uint64(phys - 1)))
		if f.sel {
			kept = below
		} else {
			kept = phys - below
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			g.release()
			g.err = err
			return g
		}
		b := cols.Begin()
		if b == 0 {
			if err := cols.Err(); err != nil && !errors.Is(err, io.EOF) {
				g.release()
				g.err = fmt.Errorf("scan %s: %w", f.add.Path, err)
			}
			return g
		}
		g.stats.RowsRead += b
		var cur []int32 // the batch's rows still kept (nil: all b)
		if f.dv != nil {
			if rows, all := keptRowsOf(f.dv, phys, b, f.sel); !all {
				cur = rows
			}
		}
		phys += b
		m := int(b)
		if cur != nil {
			m = len(cur)
		}
		if m == 0 {
			continue // (every row deleted; the next Begin skips the columns)
		}
		logical := make([]int64, m) // the kept rows' indexes in the file
		for r := range logical {
			logical[r] = kept + int64(r)
		}
		kept += int64(m)
		rec, rows, err := f.pickBatch(ctx, s, cols, b, cur, logical)
		if err != nil {
			g.release()
			g.err = fmt.Errorf("scan %s: %w", f.add.Path, err)
			return g
		}
		if rec != nil {
			g.stats.RowsOut += rec.NumRows()
			g.recs, g.rows = append(g.recs, rec), append(g.rows, rows)
		}
	}
}

// pickBatch reads the batch of n rows Begin started at rows cur (nil: all), whose
// indexes in the file are logical, step by step; nil when no row is kept.
func (f *fileScan) pickBatch(ctx context.Context, s *Scanner, rc *pqfile.Columns, n int64, cur []int32, logical []int64) (arrow.RecordBatch, []int64, error) {
	cols := make([]arrow.Array, len(s.work)) // read so far, at the rows cur names
	defer func() { arrowx.ReleaseArrays(cols) }()
	read := func(idx []int) error { // (one after another: the row groups are the fan-out)
		for _, i := range idx {
			if cols[i] != nil {
				continue
			}
			var err error
			if cols[i], err = f.pickColumn(s, rc, i, n, cur); err != nil {
				return err
			}
		}
		return nil
	}
	for k, idx := range s.pick {
		if err := read(idx); err != nil {
			return nil, nil, err
		}
		var fields []arrow.Field
		var arrs []arrow.Array
		for i, c := range cols {
			if c != nil {
				fields, arrs = append(fields, s.workArrow.Field(i)), append(arrs, c)
			}
		}
		rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(len(logical)))
		keep, err := s.opts.Pick[k].Keep(rec)
		rec.Release()
		if err != nil {
			return nil, nil, err
		}
		if err := checkKept(keep, len(logical)); err != nil {
			return nil, nil, fmt.Errorf("Pick step %d: %w", k, err)
		}
		if len(keep) == len(logical) {
			continue
		}
		if len(keep) == 0 {
			return nil, nil, nil // (the next Begin moves past the columns not read)
		}
		next := make([]int32, len(keep))
		for j, r := range keep {
			if cur == nil {
				next[j] = r
			} else {
				next[j] = cur[r]
			}
			logical[j] = logical[r]
		}
		cur, logical = next, logical[:len(keep)]
		for i, c := range cols {
			if c != nil {
				g, err := arrowx.GatherColumn(ctx, s.mem, c, keep)
				c.Release()
				cols[i] = g
				if err != nil {
					return nil, nil, err
				}
			}
		}
	}
	all := make([]int, len(s.out.Fields()))
	for i := range all {
		all[i] = i
	}
	if err := read(all); err != nil {
		return nil, nil, err
	}
	out := array.NewRecordBatch(s.out, cols[:len(all)], int64(len(logical)))
	return out, logical, nil
}

// pickColumn reads work column i of the batch of n rows at rows cur (nil: all), as the
// scan returns it.
func (f *fileScan) pickColumn(s *Scanner, rc *pqfile.Columns, i int, n int64, cur []int32) (arrow.Array, error) {
	wf, tf := s.work[i], s.workArrow.Field(i)
	m := int(n)
	if cur != nil {
		m = len(cur)
	}
	if s.isPart[strings.ToLower(wf.Name)] {
		return partitionColumn(s.mem, wf, tf.Type, f.add, m)
	}
	j := f.colOf[i]
	if j < 0 {
		return array.MakeArrayOfNull(s.mem, tf.Type, m), nil
	}
	raw, err := rc.ReadColumn(j, cur)
	if err != nil {
		return nil, err
	}
	defer raw.Release()
	if f.want != nil {
		t, _ := logicalType(f.want[j].Type, raw.DataType())
		rel := dschema.Relabel(raw, t)
		defer rel.Release()
		raw = rel
	}
	c, err := dschema.Cast(s.mem, raw, tf.Type)
	if err != nil {
		return nil, fmt.Errorf("column %s: %w", wf.Name, err)
	}
	return c, nil
}

// pickFrom applies the steps to a whole record at rows (its rows' indexes in the file)
// and returns the rows kept (nil: none).
func (f *fileScan) pickFrom(ctx context.Context, s *Scanner, rec arrow.RecordBatch, at position, rows []int64) (arrow.RecordBatch, position, error) {
	for k := range s.pick {
		keep, err := s.opts.Pick[k].Keep(rec)
		if err == nil {
			err = checkKept(keep, int(rec.NumRows()))
		}
		if err != nil {
			rec.Release()
			return nil, position{}, fmt.Errorf("scan %s: Pick step %d: %w", f.add.Path, k, err)
		}
		if len(keep) == int(rec.NumRows()) {
			continue
		}
		if len(keep) == 0 {
			rec.Release()
			return nil, position{}, nil
		}
		kept, err := arrowx.Gather(ctx, s.mem, rec, keep)
		rec.Release()
		if err != nil {
			return nil, position{}, err
		}
		rec = kept
		for j, r := range keep {
			rows[j] = rows[r]
		}
		rows = rows[:len(keep)]
	}
	return rec, position{file: at.file, first: rows[0], rows: rows}, nil
}

// checkKept checks that keep holds ascending indexes below n.
func checkKept(keep []int32, n int) error {
	for j, r := range keep {
		if r < 0 || int(r) >= n || j > 0 && r <= keep[j-1] {
			return fmt.Errorf("rows to keep not ascending below %d", n)
		}
	}
	return nil
}
