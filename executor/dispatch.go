package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/lease"
	"github.com/orchestrator-io/orchestrator/internal/sparkconnect"
	"github.com/orchestrator-io/orchestrator/jobs"
)

// Dispatcher carries out stage attempts on their engine, each while holding the lease
// of every table it writes.
type Dispatcher struct {
	local  *LocalExecutor
	holder lease.Identity
	ttl    time.Duration

	mu    sync.Mutex // guards spark
	spark map[string]*SparkExecutor
}

// NewDispatcher returns a dispatcher; ttl is the table leases' (0: DefaultLeaseTTL).
func NewDispatcher(ttl time.Duration) *Dispatcher {
	return &Dispatcher{
		local:  NewLocal(),
		holder: lease.Local(),
		ttl:    ttl,
		spark:  map[string]*SparkExecutor{},
	}
}

// Close stops every running task and closes the Spark connections.
func (d *Dispatcher) Close() error {
	err := d.local.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.spark {
		err = errors.Join(err, e.Close())
	}
	return err
}

// sparkFor returns the executor of a cluster configuration.
func (d *Dispatcher) sparkFor(cfg SparkConfig) (*SparkExecutor, error) {
	key := cfg.Remote + "\x00" + cfg.Warehouse
	for _, k := range sortedKeys(cfg.Conf) {
		key += "\x00" + k + "=" + cfg.Conf[k]
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.spark[key]; ok {
		return e, nil
	}
	e, err := NewSpark(cfg)
	if err != nil {
		return nil, err
	}
	d.spark[key] = e
	return e, nil
}

// Executor returns the executor of an engine (spark: of that cluster).
func (d *Dispatcher) Executor(engine Engine, spark *SparkConfig) (Executor, error) {
	switch engine {
	case "", Local:
		return d.local, nil
	case Spark:
		if spark == nil || spark.Remote == "" {
			return nil, errors.New("engine spark: no spark.remote configured")
		}
		return d.sparkFor(*spark)
	}
	return nil, fmt.Errorf("unknown engine %q", engine)
}

// Leases returns the table leases of a task's warehouse, with a stale lease's Spark
// operation interrupted before it is taken over. They watch a silent holder by this
// process's running clock, not the task's (which a test may hold still).
func (d *Dispatcher) Leases(t Task) *Leases {
	return &Leases{Store: t.Env.Warehouse, Holder: d.holder, TTL: d.ttl, OnStale: d.interruptStale}
}

// interruptStale interrupts the Spark operation a stale lease names, so that it cannot
// commit after the new holder starts.
func (d *Dispatcher) interruptStale(ctx context.Context, b *LeaseBody) error {
	if b.SparkRemote == "" || b.SparkSession == "" || b.SparkOperation == "" {
		return nil
	}
	// The lease holds the address without its token: use a client of this process to
	// that cluster when there is one (it has the token), else dial it as recorded.
	var c *sparkconnect.Client
	d.mu.Lock()
	for _, e := range d.spark {
		if sparkconnect.Redact(e.cfg.Remote) == b.SparkRemote {
			c = e.client
		}
	}
	d.mu.Unlock()
	if c == nil {
		var err error
		if c, err = sparkconnect.Dial(b.SparkRemote); err != nil {
			return err
		}
		defer c.Close()
	}
	s := c.Session(b.SparkSession)
	if _, err := s.Interrupt(ctx, b.SparkOperation); err != nil {
		return err
	}
	// Wait for it to end: an interrupt takes effect at the job's next task boundary.
	for {
		running, err := s.Running(ctx, b.SparkOperation)
		if err != nil || !running {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Run carries out one stage attempt on engine: it takes the lease of every table the
// stage writes (in name order, so two stages never wait for each other in a circle),
// submits the task, waits for it, and releases the leases.
func (d *Dispatcher) Run(ctx context.Context, t Task, engine Engine, spark *SparkConfig) (jobs.Result, error) {
	ex, err := d.Executor(engine, spark)
	if err != nil {
		return jobs.Result{}, fmt.Errorf("%s %s: %w", t.Stage.Kind(), t.Stage.Name(), err)
	}
	var paths []string
	for _, name := range jobs.Writes(t.Stage) {
		if decl, ok := t.Env.Tables[name]; ok {
			paths = append(paths, decl.Path)
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	leases := d.Leases(t)
	var held []*Lease
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, l := range held {
			_ = l.Release(rctx)
		}
	}()
	for _, p := range paths {
		l, err := leases.Acquire(ctx, p, t.Key, engine)
		if err != nil {
			return jobs.Result{}, fmt.Errorf("%s %s: %w", t.Stage.Kind(), t.Stage.Name(), err)
		}
		held = append(held, l)
	}
	if engine == Spark {
		remote := sparkconnect.Redact(spark.Remote) // no token in the warehouse
		t.OnOperation = func(session, op string) {
			for _, l := range held {
				_ = l.SetOperation(ctx, remote, session, op)
			}
		}
	}
	var notes []string
	for i, l := range held {
		if b := l.TookOver; b != nil {
			note := fmt.Sprintf("took over the lease of %s from %s (its holder, %s pid %d, is gone)", paths[i], b.Task, b.Holder.Host, b.Holder.PID)
			if b.SparkOperation != "" {
				note += fmt.Sprintf("; its Spark operation %s was interrupted first", b.SparkOperation)
			}
			notes = append(notes, note)
		}
	}
	if err := ex.Submit(ctx, t); err != nil {
		return jobs.Result{}, err
	}
	res, err := ex.Wait(ctx, t.Key)
	res.Notes = append(notes, res.Notes...)
	if lines := ex.Logs(t.Key); len(lines) > 0 && engine == Spark {
		res.Notes = append(res.Notes, fmt.Sprintf("ran on spark (%d statements)", len(res.Operations)))
	}
	if f, ok := ex.(interface{ forget(string) }); ok {
		f.forget(t.Key)
	}
	return res, err
}
