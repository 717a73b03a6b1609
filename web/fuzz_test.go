package web

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/orchestrator-io/orchestrator/internal/testenv"
)

// fuzzRoutes are the routes whose query parameters FuzzAPIQuery throws inputs at.
var fuzzRoutes = []string{
	"/api/v1/runs",
	"/api/v1/pipelines/shop/grid",
	"/api/v1/runs/shop@20260101T000000Z/events",
	"/api/v1/tables/raw.customers/history",
	"/api/v1/tables/raw.customers/rows",
	"/api/v1/tables/raw.customers/changes",
	"/api/v1/tables/raw.customers/diff",
	"/api/v1/tables/dim.customer/rows",
	"/api/v1/tables/dim.customer/diff",
	"/pipelines/shop",
	"/tables/raw.customers/rows",
	"/tables/raw.customers/changes",
	"/tables/raw.customers/diff",
}

var (
	fuzzOnce sync.Once
	fuzzSite *testEnv
)

// FuzzAPIQuery: any query string on any route answers without a panic, never 500, with
// JSON on the API, and one request cannot make the server allocate without bound. The
// seed corpus is in testdata/fuzz/FuzzAPIQuery.
func FuzzAPIQuery(f *testing.F) {
	f.Add(uint8(0), "pipeline=shop&status=succeeded,failed&trigger=manual&limit=1&cursor=eyJzaG9wIjoxfQ")
	f.Add(uint8(4), "version=1&where=customer_id%20%3D%20%27C-1%27&order_by=city&desc=1&columns=city,name&limit=2")
	f.Add(uint8(5), "from=2026-01-01&to=9&types=insert,update_postimage")
	fuzzOnce.Do(func() {
		fuzzSite = newEnv(f, envOptions{})
		fuzzSite.twoRuns()
	})
	e := fuzzSite
	h := e.site.Handler()
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		path := fuzzRoutes[int(route)%len(fuzzRoutes)]
		testenv.MaxAlloc(t, 256<<20, func() {
			req := httptest.NewRequest("GET", path, nil)
			req.URL.RawQuery = query
			req.Host = "127.0.0.1"
			if strings.HasSuffix(path, "/events") {
				req.Header.Set("Last-Event-ID", query)
			}
			rr := httptest.NewRecorder()
			h.ServeHTTP(rr, req)
			if rr.Code >= 500 {
				t.Fatalf("GET %s?%s: %d %s", path, query, rr.Code, rr.Body.String())
			}
			if strings.HasPrefix(path, "/api/") && (!strings.HasSuffix(path, "/events") || rr.Code != 200) {
				if !json.Valid(rr.Body.Bytes()) {
					t.Fatalf("GET %s?%s: %d, not JSON: %.300s", path, query, rr.Code, rr.Body.String())
				}
			}
		})
	})
}
