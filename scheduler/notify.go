package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/orchestrator-io/orchestrator/pipelines"
)

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// Retries after a failed POST (default 4), waiting MinWait doubling up to MaxWait
	// (defaults 1s and 30s); Timeout bounds one POST (default 10s).
	Retries          int
	MinWait, MaxWait time.Duration
	Timeout          time.Duration
	// BaseURL, when set, makes each notification link to BaseURL/runs/<id>.
	BaseURL string
	// Now stamps deliveries; nil means time.Now.
	Now func() time.Time
	// Logger receives a line per failed delivery; nil means slog.Default().
	Logger *slog.Logger
}

// Notifier sends a JSON POST per webhook when a run ends, with retries and backoff. It
// never fails a run: the outcome of each delivery goes into the run's record. URLs may
// hold secrets (from ${VAR}): records and logs show them as written in the pipeline.
type Notifier struct {
	cfg    NotifierConfig
	client *retryablehttp.Client
}

// NewNotifier returns a Notifier.
func NewNotifier(cfg NotifierConfig) *Notifier {
	if cfg.Retries == 0 {
		cfg.Retries = 4
	}
	if cfg.MinWait == 0 {
		cfg.MinWait = time.Second
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 30 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := retryablehttp.NewClient()
	c.RetryMax = max(cfg.Retries, 0)
	c.RetryWaitMin, c.RetryWaitMax = cfg.MinWait, cfg.MaxWait
	c.HTTPClient.Timeout = cfg.Timeout
	c.Logger = nil // its log lines carry the URL
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if n, ok := ctx.Value(attemptsKey{}).(*int); ok {
			*n++
		}
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	return &Notifier{cfg: cfg, client: c}
}

// Message is the JSON body of a notification.
type Message struct {
	Event       string    `json:"event"` // success, failure, or a watch's (deadline_missed...)
	RunID       string    `json:"run_id,omitempty"`
	Pipeline    string    `json:"pipeline"`
	Status      Status    `json:"status,omitempty"`
	Trigger     string    `json:"trigger,omitempty"`
	Slot        time.Time `json:"slot,omitzero"`
	Start       time.Time `json:"start,omitzero"`
	End         time.Time `json:"end,omitzero"`
	FailedStage string    `json:"failed_stage,omitempty"`
	// Table and Detail are set by the freshness and deadline watches' events.
	Table  string `json:"table,omitempty"`
	Detail string `json:"detail,omitempty"`
	Error  string `json:"error,omitempty"`
	Link   string `json:"link,omitempty"`
}

// MessageOf is the notification of an ended run.
func (n *Notifier) MessageOf(rec *Record, event string) Message {
	m := Message{Event: event, RunID: rec.ID, Pipeline: rec.Pipeline, Status: rec.Status,
		Trigger: string(rec.Trigger.Kind), Slot: rec.Trigger.Slot, Start: rec.Start, End: rec.End, Error: rec.Error}
	if m.Error == "" {
		m.Error = rec.Reason
	}
	for _, s := range rec.Stages {
		if s.Status == Failed {
			m.FailedStage, m.Error = s.Name, s.Error
			break
		}
	}
	if n.cfg.BaseURL != "" {
		m.Link = strings.TrimRight(n.cfg.BaseURL, "/") + "/runs/" + rec.ID
	}
	return m
}

// Send posts the run's notification to each webhook and returns the outcomes.
func (n *Notifier) Send(ctx context.Context, rec *Record, event string, hooks []pipelines.Webhook) []Delivery {
	return n.post(ctx, rec.ID, n.MessageOf(rec, event), hooks)
}

// WatchMessage is the notification of a deadline or freshness breach or recovery.
func (n *Notifier) WatchMessage(w Watch, event string) Message {
	m := Message{Event: event, Pipeline: w.Pipeline, Table: w.Table, Detail: w.Text()}
	if w.Kind == WatchDeadline {
		m.RunID, m.Slot, m.Status = w.Run, w.Slot, w.RunStatus
		if n.cfg.BaseURL != "" && w.Run != "" {
			m.Link = strings.TrimRight(n.cfg.BaseURL, "/") + "/runs/" + w.Run
		}
	} else if n.cfg.BaseURL != "" {
		m.Link = strings.TrimRight(n.cfg.BaseURL, "/") + "/tables/" + w.Table
	}
	return m
}

// SendWatch posts a watch's breach or recovery to each webhook and returns the outcomes.
func (n *Notifier) SendWatch(ctx context.Context, w Watch, event string, hooks []pipelines.Webhook) []Delivery {
	return n.post(ctx, w.Pipeline, n.WatchMessage(w, event), hooks)
}

// post sends one message to each webhook; about names it in the log.
func (n *Notifier) post(ctx context.Context, about string, msg Message, hooks []pipelines.Webhook) []Delivery {
	body, _ := json.Marshal(msg)
	event := msg.Event
	out := make([]Delivery, 0, len(hooks))
	for _, h := range hooks {
		d := Delivery{URL: h.Display, Event: event}
		attempts := 0
		actx := context.WithValue(ctx, attemptsKey{}, &attempts)
		req, err := retryablehttp.NewRequestWithContext(actx, http.MethodPost, h.URL, bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("User-Agent", "orchestrator")
			var resp *http.Response
			resp, err = n.client.Do(req)
			d.Attempts = attempts
			if resp != nil {
				d.Status = resp.StatusCode
				resp.Body.Close()
				if err == nil && resp.StatusCode >= 300 {
					err = fmt.Errorf("HTTP %s", resp.Status)
				}
			}
		}
		d.Time = n.cfg.Now().UTC()
		if err != nil {
			d.Error = redact(err, h)
			n.cfg.Logger.Warn("notification not delivered", "about", about, "url", h.Display, "err", d.Error)
		}
		out = append(out, d)
	}
	return out
}

// attemptsKey carries a delivery's attempt counter to CheckRetry.
type attemptsKey struct{}

// redact writes a delivery error with the webhook as the pipeline wrote it: net/http's
// errors name the URL, which may hold a secret.
func redact(err error, h pipelines.Webhook) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Sprintf("%s %s: %s", ue.Op, h.Display, strings.ReplaceAll(ue.Err.Error(), h.URL, h.Display))
	}
	return strings.ReplaceAll(err.Error(), h.URL, h.Display)
}
