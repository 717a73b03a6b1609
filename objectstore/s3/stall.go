package s3

import (
	"context"
	"net"
	"net/http"
	"time"
)

// watchStalls makes every connection of tr fail a read or write that makes no progress
// for timeout, and closes idle connections before that can fire on them.
func watchStalls(tr *http.Transport, timeout time.Duration) {
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: c, timeout: timeout}, nil
	}
	if tr.IdleConnTimeout == 0 || tr.IdleConnTimeout > timeout/2 {
		tr.IdleConnTimeout = timeout / 2
	}
	if tr.ResponseHeaderTimeout == 0 || tr.ResponseHeaderTimeout > timeout {
		tr.ResponseHeaderTimeout = timeout
	}
}

// stallConn gives each Read and Write a fresh deadline: an operation fails only when
// the peer sends or takes nothing for the whole timeout.
type stallConn struct {
	net.Conn
	timeout time.Duration
}

func (c *stallConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *stallConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
