package lineage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/orchestrator-io/orchestrator/pipelines"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Retries after a failed POST (default 3), waiting MinWait doubling up to MaxWait
	// (defaults 500ms and 5s); Timeout bounds one POST (default 10s).
	Retries          int
	MinWait, MaxWait time.Duration
	Timeout          time.Duration
}

// Client posts events to an OpenLineage consumer's HTTP API.
type Client struct {
	c    *retryablehttp.Client // with retries
	once *retryablehttp.Client // a single try
}

// NewClient returns a Client.
func NewClient(cfg ClientConfig) *Client {
	if cfg.Retries == 0 {
		cfg.Retries = 3
	}
	if cfg.MinWait == 0 {
		cfg.MinWait = 500 * time.Millisecond
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 5 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	c := retryablehttp.NewClient()
	c.RetryMax = max(cfg.Retries, 0)
	c.RetryWaitMin, c.RetryWaitMax = cfg.MinWait, cfg.MaxWait
	c.HTTPClient.Timeout = cfg.Timeout
	c.Logger = nil
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	once := retryablehttp.NewClient()
	once.RetryMax = 0
	once.HTTPClient.Timeout = cfg.Timeout
	once.Logger = nil
	once.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return &Client{c: c, once: once}
}

// Endpoint is the URL events of l are posted to.
func Endpoint(l pipelines.Lineage) string {
	return strings.TrimRight(l.URL, "/") + "/" + strings.TrimLeft(l.Endpoint, "/")
}

// Send posts one event to l's consumer, with retries unless once. The error names the
// consumer as the pipeline wrote it (l.Display), never its expanded URL or API key.
func (c *Client) Send(ctx context.Context, l pipelines.Lineage, ev Event, once bool) (status int, err error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, err
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, Endpoint(l), bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("lineage %s: %s", l.Display, redact(err, l))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "orchestrator")
	if l.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.APIKey)
	}
	hc := c.c
	if once {
		hc = c.once
	}
	resp, err := hc.Do(req)
	if resp != nil {
		status = resp.StatusCode
		resp.Body.Close()
		if err == nil && resp.StatusCode >= 300 {
			err = fmt.Errorf("HTTP %s", resp.Status)
		}
	}
	if err != nil {
		return status, fmt.Errorf("lineage %s: %s", l.Display, redact(err, l))
	}
	return status, nil
}

// redact writes an error without the consumer's expanded URL or API key.
func redact(err error, l pipelines.Lineage) string {
	msg := err.Error()
	var ue *url.Error
	if e, ok := err.(*url.Error); ok {
		ue = e
		msg = ue.Op + ": " + ue.Err.Error()
	}
	msg = strings.ReplaceAll(msg, Endpoint(l), l.Display)
	msg = strings.ReplaceAll(msg, l.URL, l.Display)
	if l.APIKey != "" {
		msg = strings.ReplaceAll(msg, l.APIKey, "***")
	}
	return msg
}
