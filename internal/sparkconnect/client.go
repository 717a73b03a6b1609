package sparkconnect

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os/user"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/orchestrator-io/orchestrator/internal/sparkconnect/pb"
)

// MaxMessageBytes is the largest response message accepted (gRPC's default is 4 MiB).
const MaxMessageBytes = 128 << 20

// clientType is what the server's UI and logs show as the client.
const clientType = "orchestrator"

// Remote is a parsed Spark Connect address: sc://host:port/;key=value;...
type Remote struct {
	Host  string
	Port  string
	Token string // bearer token (param token); implies TLS
	User  string // user_id param; default the OS user
	TLS   bool   // use_ssl=true, or a token
}

// ParseRemote reads a Spark Connect connection string: sc://host[:port][/;param=value...]
// with the params token, user_id and use_ssl. The port defaults to 15002.
func ParseRemote(s string) (Remote, error) {
	if !strings.HasPrefix(s, "sc://") {
		return Remote{}, fmt.Errorf("spark remote %q: expected sc://host:port", Redact(s))
	}
	rest := strings.TrimPrefix(s, "sc://")
	hostport, params, _ := strings.Cut(rest, "/")
	u, err := url.Parse("//" + hostport)
	if err != nil || u.Hostname() == "" {
		return Remote{}, fmt.Errorf("spark remote %q: expected sc://host:port", Redact(s))
	}
	r := Remote{Host: u.Hostname(), Port: u.Port()}
	if r.Port == "" {
		r.Port = "15002"
	}
	for p := range strings.SplitSeq(strings.TrimPrefix(params, ";"), ";") {
		if p == "" {
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return Remote{}, fmt.Errorf("spark remote %q: parameter %q is not key=value", Redact(s), p)
		}
		switch k {
		case "token":
			r.Token, r.TLS = v, true
		case "user_id":
			r.User = v
		case "use_ssl":
			r.TLS = v == "true"
		default:
			return Remote{}, fmt.Errorf("spark remote %q: unknown parameter %q (expected token, user_id or use_ssl)", Redact(s), k)
		}
	}
	return r, nil
}

// Redact returns a connection string without its token, for logs and records.
func Redact(remote string) string {
	base, params, ok := strings.Cut(remote, "/;")
	if !ok {
		return remote
	}
	var keep []string
	for p := range strings.SplitSeq(params, ";") {
		if p != "" && !strings.HasPrefix(p, "token=") {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return base
	}
	return base + "/;" + strings.Join(keep, ";")
}

// Client is a connection to one Spark Connect server. It is safe for concurrent use.
type Client struct {
	conn   *grpc.ClientConn
	svc    pb.SparkConnectServiceClient
	remote Remote
	user   *pb.UserContext
}

// Dial connects to a Spark Connect server. The connection is made lazily: an
// unreachable server fails the first call, not Dial.
func Dial(remote string) (*Client, error) {
	r, err := ParseRemote(remote)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if r.TLS {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient(r.Host+":"+r.Port,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("spark connect %s: %w", Redact(remote), err)
	}
	name := r.User
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		} else {
			name = "orchestrator"
		}
	}
	return &Client{conn: conn, svc: pb.NewSparkConnectServiceClient(conn), remote: r, user: &pb.UserContext{UserId: name, UserName: name}}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// ctx adds the bearer token, if any.
func (c *Client) ctx(ctx context.Context) context.Context {
	if c.remote.Token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.remote.Token)
}

// NewSession returns a fresh session (the server creates it on its first request).
func (c *Client) NewSession() *Session { return c.Session(uuid.NewString()) }

// Session returns the session with the given id: a new one, or one another process
// started (to interrupt its operations).
func (c *Client) Session(id string) *Session { return &Session{c: c, id: id} }

// NewOperationID returns a fresh operation id (the server requires a UUID).
func NewOperationID() string { return uuid.NewString() }

// Error is an error the Spark server reported.
type Error struct {
	// Class is Spark's error class (e.g. DELTA_CONCURRENT_APPEND), when given.
	Class string
	// SQLState is the SQLSTATE, when given.
	SQLState string
	Message  string
}

func (e *Error) Error() string {
	if e.Class != "" && !strings.Contains(e.Message, e.Class) {
		return "[" + e.Class + "] " + e.Message
	}
	return e.Message
}

// ErrInterrupted is what Execute returns (wrapped) for an operation interrupted on the
// server by someone else.
var ErrInterrupted = errors.New("spark operation interrupted")
