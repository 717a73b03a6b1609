package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/orchestrator-io/orchestrator/cron"
	"github.com/orchestrator-io/orchestrator/internal/lease"
	"github.com/orchestrator-io/orchestrator/pipelines"
)

// Config configures a Scheduler.
type Config struct {
	// Runner runs and records the runs; its clock is the scheduler's.
	Runner *Runner
	// Now is the clock; nil means time.Now. Tests pin it and call Tick.
	Now func() time.Time
	// HeartbeatTimeout is how old a run's heartbeat may get before the run is marked
	// interrupted (default DefaultHeartbeatTimeout); runs are heartbeated every third
	// of it.
	HeartbeatTimeout time.Duration
	// LeaseTTL is how long a silent lease holder keeps the lease (default
	// DefaultLeaseTTL).
	LeaseTTL time.Duration
	// Late is how long after its instant a slot still counts as on time rather than
	// missed (default DefaultLate).
	Late time.Duration
	// Addr is this process's HTTP address, written in the lease.
	Addr string
	// Alive reports whether process pid of this host still runs (nil: kill(pid, 0)), so
	// that a restarted serve marks its predecessor's runs interrupted at once.
	Alive func(host string, pid int) bool
	// Logger receives scheduling events; nil means slog.Default().
	Logger *slog.Logger
	// OnSlot, when set, is told how each due slot was handled (run or skipped, on time
	// or missed, how late); it must not block (the web's metrics).
	OnSlot func(SlotEvent)
	// WatchEvery is how often a table's freshness is read from its log (default
	// DefaultWatchEvery); deadlines are judged at every tick.
	WatchEvery time.Duration
	// OnTick, when set, is told how long each pass over a warehouse's pipelines took,
	// by phase; it must not block (the web's metrics).
	OnTick func(TickTimes)
}

// TickTimes is how long one tick's pass over the pipelines of a warehouse took, in real
// time, by phase.
type TickTimes struct {
	// Plan: deciding every pipeline's due slots under its policies (it writes nothing
	// but a pipeline's first load).
	Plan time.Duration
	// Record: writing the slots' records (a claim for a run, a skipped record).
	Record time.Duration
	// Dispatch: starting the runs that may start.
	Dispatch time.Duration
	// Slots is how many slots were planned.
	Slots int
}

// DefaultLate is how late a slot may be handled and still run as scheduled rather than
// be treated as missed (and so follow the catch-up policy).
const DefaultLate = time.Minute

// maxSkipRecords bounds the skipped records written for one catch-up; slots beyond it
// are folded into one record that names the range.
const maxSkipRecords = 1000

// maxSlotsPerTick bounds the slots of one pipeline handled in one tick; the next tick
// goes on from the watermark.
const maxSlotsPerTick = 1000

// Scheduler triggers the runs of a set of pipelines on their schedules, with the
// overlap and catch-up policies, and takes run requests; of several schedulers on one
// warehouse only the lease holder schedules it. Tick drives it; all methods are safe
// for concurrent use.
type Scheduler struct {
	cfg    Config
	runner *Runner
	log    *slog.Logger
	base   context.Context // runs started by the scheduler live under it
	stop   context.CancelFunc

	mu       sync.Mutex            // guards the fields below and every pipeState
	pipes    map[string]*pipeState // by pipeline name
	leases   map[*Store]*serveLease
	marks    map[*Store]*marks           // watermarks of the stores whose lease this scheduler holds
	pausedIn map[*Store]map[string]Pause // the paused pipelines of each store, read at each tick
	stopping bool
	lastBeat time.Time
	watches  map[string]*pipeWatches // by pipeline: the deadline and freshness watches

	watchMu sync.Mutex // serialises the checks of watches and the writes of their state

	wg sync.WaitGroup // runs started by the scheduler
}

// marks are the watermarks of one store as its lease holder keeps them.
type marks struct {
	slot  map[string]time.Time
	dirty bool // changed since written
}

// pipeState is what the scheduler knows of one pipeline.
type pipeState struct {
	spec  *pipelines.Spec
	store *Store
	sched *cron.Schedule // anchored; nil without a schedule

	loaded    bool      // watermark and anchor read
	watermark time.Time // every slot up to it has a record
	running   map[string]bool
	queue     []string  // run ids waiting for a turn, in order
	reruns    []*Record // interrupted slots that the catch-up policy may run again
	removed   bool      // no longer loaded: no more slots
}

// New returns a Scheduler with no pipelines.
func New(cfg Config) *Scheduler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Late <= 0 {
		cfg.Late = DefaultLate
	}
	if cfg.Alive == nil {
		cfg.Alive = lease.ProcessAlive
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WatchEvery <= 0 {
		cfg.WatchEvery = DefaultWatchEvery
	}
	base, stop := context.WithCancel(context.Background())
	return &Scheduler{cfg: cfg, runner: cfg.Runner, log: cfg.Logger, base: base, stop: stop,
		pipes: map[string]*pipeState{}, leases: map[*Store]*serveLease{}, marks: map[*Store]*marks{}, pausedIn: map[*Store]map[string]Pause{}, watches: map[string]*pipeWatches{}}
}

// Set makes specs the scheduled pipelines (each once, by name); a pipeline left out is
// no longer scheduled (its active runs go on). A changed definition takes effect for
// the next slot; the slots already handled stay handled.
func (s *Scheduler) Set(ctx context.Context, specs []*pipelines.Spec) error {
	stores := make([]*Store, len(specs))
	for i, spec := range specs {
		st, err := s.runner.Store(ctx, spec)
		if err != nil {
			return err
		}
		stores[i] = st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := map[string]bool{}
	for i, spec := range specs {
		keep[spec.Name] = true
		ps := s.pipes[spec.Name]
		if ps == nil {
			ps = &pipeState{running: map[string]bool{}}
			s.pipes[spec.Name] = ps
		}
		if ps.spec == nil || ps.store != stores[i] || ps.spec.Schedule != spec.Schedule || ps.spec.Location.String() != spec.Location.String() {
			ps.loaded = false // plan reads the watermark and anchor again
		}
		ps.spec, ps.store, ps.removed = spec, stores[i], false
		if s.leases[stores[i]] == nil {
			s.leases[stores[i]] = &serveLease{store: stores[i]}
		}
	}
	for name, ps := range s.pipes {
		switch {
		case keep[name]:
		case len(ps.running) == 0 && len(ps.queue) == 0:
			delete(s.pipes, name)
		default:
			ps.removed = true // no more slots; its queued runs still run
		}
	}
	return nil
}

// Pipelines returns the loaded pipelines, sorted by name.
func (s *Scheduler) Pipelines() []*pipelines.Spec {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*pipelines.Spec
	for _, ps := range s.pipes {
		if !ps.removed {
			out = append(out, ps.spec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Pipeline returns the loaded pipeline called name, or nil.
func (s *Scheduler) Pipeline(name string) *pipelines.Spec {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps := s.pipes[name]; ps != nil && !ps.removed {
		return ps.spec
	}
	return nil
}

// Runner returns the scheduler's runner.
func (s *Scheduler) Runner() *Runner { return s.runner }

// Tick does one pass at the clock's now: it acquires or renews each warehouse's lease
// and, for the warehouses it holds, heartbeats its runs, marks stale runs interrupted,
// takes run requests, plans every pipeline's due slots under its policies and starts
// what may start. Errors are logged and the pass goes on; the next tick tries again.
func (s *Scheduler) Tick(ctx context.Context) {
	now := s.cfg.Now()
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	leases := make(map[*Store]*serveLease, len(s.leases))
	for st, l := range s.leases {
		leases[st] = l
	}
	beat := now.Sub(s.lastBeat) >= s.cfg.HeartbeatTimeout/3
	if beat {
		s.lastBeat = now
	}
	s.mu.Unlock()
	if beat {
		s.runner.Heartbeat(ctx)
	}
	for st, l := range leases {
		// Paused pipelines: one listing a tick, so that a pause from any process holds
		// at the next slot (and every serve's pages show it).
		if paused, err := st.PausedPipelines(ctx); err != nil {
			s.log.Warn("read paused pipelines", "warehouse", st.Location(), "err", err)
		} else {
			s.mu.Lock()
			s.pausedIn[st] = paused
			s.mu.Unlock()
		}
		held, err := l.step(ctx, now, s.leaseConfig(st))
		if err != nil {
			s.log.Warn("scheduler lease", "warehouse", st.Location(), "err", err)
		}
		if !held {
			continue
		}
		if l.acquired() {
			s.reload(st) // another process may have scheduled meanwhile
		}
		if !l.checked(now, s.cfg.HeartbeatTimeout/3) {
			s.checkLiveness(ctx, st, now)
		}
		s.takeRequests(ctx, st, now)
		s.planStore(ctx, st, now)
		s.checkWatches(ctx, st, now)
	}
}

// checked reports whether the liveness check ran within every, and notes it ran if not.
func (l *serveLease) checked(now time.Time, every time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lastCheck.IsZero() && now.Sub(l.lastCheck) < every {
		return true
	}
	l.lastCheck = now
	return false
}

// acquired reports whether the lease was taken since the last call.
func (l *serveLease) acquired() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.wasHeld
	l.wasHeld = l.held
	return l.held && !was
}

// reload makes the next plan of st's pipelines read their watermarks from the store.
func (s *Scheduler) reload(st *Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.marks, st)
	for name, ps := range s.pipes {
		if ps.store == st {
			ps.loaded = false
			delete(s.watches, name) // another holder may have judged them meanwhile
		}
	}
}

func (s *Scheduler) leaseConfig(st *Store) leaseConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name, ps := range s.pipes {
		if ps.store == st && !ps.removed {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return leaseConfig{id: s.runner.Identity(), addr: s.cfg.Addr, ttl: s.cfg.LeaseTTL, pipelines: names, alive: s.cfg.Alive}
}

// LeaseState is what /healthz shows of one warehouse's lease.
type LeaseState struct {
	Warehouse string    `json:"warehouse"`
	Held      bool      `json:"held"`
	Holder    string    `json:"holder,omitempty"` // host pid of the holder
	Gen       int64     `json:"gen"`
	Renewed   time.Time `json:"renewed,omitzero"`
}

// Leases returns the lease state of each warehouse, by warehouse.
func (s *Scheduler) Leases() []LeaseState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LeaseState
	for st, l := range s.leases {
		l.mu.Lock()
		ls := LeaseState{Warehouse: st.Location(), Held: l.held, Gen: l.body.Gen, Renewed: l.body.Renewed}
		if l.body.Holder.Host != "" {
			ls.Holder = fmt.Sprintf("%s pid %d", l.body.Holder.Host, l.body.Holder.PID)
		}
		l.mu.Unlock()
		out = append(out, ls)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Warehouse < out[j].Warehouse })
	return out
}

// Shutdown stops the scheduler: no slot is triggered any more, runs in progress start
// no new stage, running stages get grace to finish (a safe point), then are cancelled;
// it returns when every run has ended and its record is final, and releases the leases
// so that a standby takes over at once.
func (s *Scheduler) Shutdown(ctx context.Context, grace time.Duration, reason string) {
	s.mu.Lock()
	s.stopping = true
	leases := make([]*serveLease, 0, len(s.leases))
	for _, l := range s.leases {
		leases = append(leases, l)
	}
	s.mu.Unlock()
	for _, rec := range s.runner.Owned() {
		if rec.Status == Queued {
			if _, err := s.runner.Finish(ctx, rec.ID, Cancelled, reason+": not started"); err != nil {
				s.log.Warn("end a queued run", "run", rec.ID, "err", err)
			}
		}
	}
	s.runner.Drain(reason + ": stages not started were cancelled")
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.runner.CancelAll(reason + ": stages still running after the grace period were cancelled")
		<-done
	}
	s.stop()
	for _, l := range leases {
		if err := l.release(ctx, s.cfg.Now()); err != nil {
			s.log.Warn("release lease", "err", err)
		}
	}
}

// Wait waits for every run the scheduler started to end (tests).
func (s *Scheduler) Wait() { s.wg.Wait() }
