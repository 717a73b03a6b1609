package scheduler

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/orchestrator-io/orchestrator/internal/lease"
	"github.com/orchestrator-io/orchestrator/objectstore/mem"
)

// A process that looks once (the CLI) judges the lease by the store's clock alone: a
// holder whose own clock is hours off is live while it rewrites its generation, and a
// generation the store last wrote more than a TTL ago is not, whatever time the holder
// recorded in it. Released leases and gone holders of this host are never live.
func TestLiveLeaseByTheStoresClock(t *testing.T) {
	ctx := context.Background()
	storeClock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st := NewStore(mem.New(mem.Config{Now: func() time.Time { return storeClock }}))
	other := lease.Identity{Host: "other-host", PID: 77, Instance: "serve1"}
	write := func(b LeaseBody) {
		t.Helper()
		if err := st.putJSON(ctx, leaseKey(b.Gen), b, false); err != nil {
			t.Fatal(err)
		}
	}
	live := func(want bool, what string) {
		t.Helper()
		got, err := st.LiveLease(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if (got != nil) != want {
			t.Errorf("%s: live %v, want %v", what, got != nil, want)
		}
	}
	live(false, "no lease")
	// The holder's clock runs three hours behind: its recorded renewal looks stale.
	body := LeaseBody{Gen: 1, Holder: other, Renewed: storeClock.Add(-3 * time.Hour), TTL: Duration(15 * time.Second), Pipelines: []string{"p"}}
	write(body)
	storeClock = storeClock.Add(10 * time.Second)
	live(true, "rewritten 10s ago by the store's clock, holder's clock 3h behind")
	storeClock = storeClock.Add(6 * time.Second)
	live(false, "not rewritten for 16s (TTL 15s)")
	// The holder's clock runs ahead: its recorded renewal is in the future; the store
	// last wrote the generation 20 s ago.
	body.Seq, body.Renewed = 1, storeClock.Add(3*time.Hour)
	write(body)
	storeClock = storeClock.Add(20 * time.Second)
	live(false, "holder's clock 3h ahead, generation not rewritten for 20s")
	write(body)
	live(true, "just rewritten")
	body.Released = true
	write(body)
	live(false, "released")
	// A holder of this host whose process is gone.
	host, _ := os.Hostname()
	body.Released, body.Gen, body.Holder = false, 2, lease.Identity{Host: host, PID: 1 << 30, Instance: "gone"}
	write(body)
	live(false, "held by a gone process of this host")
	if infos, err := st.st.List(ctx, leaseProbeDir, ""); err != nil || len(infos) != 0 {
		t.Errorf("probe objects left behind: %v %v", infos, err)
	}
}
