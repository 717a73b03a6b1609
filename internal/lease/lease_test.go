package lease

import (
	"encoding/json"
	"testing"
	"time"
)

// A lease goes stale only after its generation and renewal count stayed the same for a
// TTL by the observer's clock, whatever the holder's clock said when it wrote them.
func TestWatchStaleByTheObserversClock(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := 15 * time.Second
	var w Watch
	if w.Stale(3, 7, ttl, t0) {
		t.Fatal("a lease seen for the first time is stale")
	}
	if w.Stale(3, 7, ttl, t0.Add(ttl-time.Millisecond)) {
		t.Fatal("stale before a whole TTL passed on the observer's clock")
	}
	// The holder renews: the watch starts again from the moment it saw the renewal.
	if w.Stale(3, 8, ttl, t0.Add(ttl)) {
		t.Fatal("stale right after a renewal")
	}
	if w.Stale(3, 8, ttl, t0.Add(2*ttl-time.Millisecond)) {
		t.Fatal("stale less than a TTL after the renewal was seen")
	}
	if !w.Stale(3, 8, ttl, t0.Add(2*ttl)) {
		t.Fatal("not stale after a TTL without a renewal")
	}
	// A new generation (another holder) is watched from scratch, even with the same
	// renewal count.
	if w.Stale(4, 8, ttl, t0.Add(10*ttl)) {
		t.Fatal("a new generation is stale at once")
	}
	if got := w.Since(); !got.Equal(t0.Add(10 * ttl)) {
		t.Errorf("Since %v, want when generation 4 was first seen", got)
	}
}

func TestGone(t *testing.T) {
	me := Identity{Host: "h1", PID: 10, Instance: "me"}
	dead := func(string, int) bool { return false }
	alive := func(string, int) bool { return true }
	for _, c := range []struct {
		name   string
		holder Identity
		alive  func(string, int) bool
		want   bool
	}{
		{"a dead process of this host", Identity{Host: "h1", PID: 11, Instance: "x"}, dead, true},
		{"a live process of this host", Identity{Host: "h1", PID: 11, Instance: "x"}, alive, false},
		{"another host: never known gone", Identity{Host: "h2", PID: 11, Instance: "x"}, dead, false},
		{"this process", Identity{Host: "h1", PID: 10, Instance: "y"}, dead, false},
		{"no pid recorded", Identity{Host: "h1", Instance: "x"}, dead, false},
	} {
		if got := Gone(c.holder, me, c.alive); got != c.want {
			t.Errorf("%s: Gone %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(struct{ TTL Duration }{Duration(15 * time.Second)})
	if err != nil || string(b) != `{"TTL":"15s"}` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	var v struct{ TTL Duration }
	if err := json.Unmarshal([]byte(`{"TTL":"1m30s"}`), &v); err != nil || time.Duration(v.TTL) != 90*time.Second {
		t.Fatalf("unmarshal: %v %v", v.TTL, err)
	}
}
