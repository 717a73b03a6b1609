package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Auth is who may use the server. With no token at all it is open, which New allows on
// a loopback address only.
type Auth struct {
	// Token may view and change (trigger, retry, cancel).
	Token string
	// ReadToken may view only.
	ReadToken string
}

func (a Auth) open() bool { return a.Token == "" && a.ReadToken == "" }

// role is what a request may do.
type role int

const (
	roleNone  role = iota
	roleRead       // view
	roleAdmin      // view and change
)

// sessionCookie carries a signed session after a login: the role and its expiry,
// HMAC-signed with a key derived from that role's token (a changed token ends its
// sessions). It is HttpOnly and SameSite=Strict.
const (
	sessionCookie = "orch_session"
	sessionTTL    = 12 * time.Hour
)

// CheckListen refuses to serve on an address other than loopback without a token.
func CheckListen(addr string, a Auth) error {
	if !a.open() {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if !loopbackHost(host) {
		return fmt.Errorf("listen address %s is not loopback: serving it needs a token (--auth-token-file FILE or ORCH_AUTH_TOKEN), or listen on 127.0.0.1", addr)
	}
	return nil
}

// loopbackHost reports whether host names this machine only.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func tokenEqual(got, want string) bool {
	if want == "" {
		return false
	}
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// roleOfToken returns the role a token grants.
func (a Auth) roleOfToken(tok string) role {
	switch {
	case tokenEqual(tok, a.Token):
		return roleAdmin
	case tokenEqual(tok, a.ReadToken):
		return roleRead
	}
	return roleNone
}

// errBadToken: a bearer token was given and is wrong.
var errBadToken = errors.New("invalid token")

// identify returns a request's role and whether it came by cookie. With an open Auth
// every request is admin.
func (a Auth) identify(r *http.Request, now time.Time) (role, bool, error) {
	if a.open() {
		return roleAdmin, false, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return roleNone, false, errBadToken
		}
		if ro := a.roleOfToken(strings.TrimSpace(tok)); ro != roleNone {
			return ro, false, nil
		}
		return roleNone, false, errBadToken
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if ro := a.session(c.Value, now); ro != roleNone {
			return ro, true, nil
		}
	}
	return roleNone, false, nil
}

func (a Auth) sessionKey(ro role) []byte {
	tok := a.Token
	if ro == roleRead {
		tok = a.ReadToken
	}
	if tok == "" {
		return nil
	}
	k := sha256.Sum256([]byte("orchestrator-session\x00" + tok))
	return k[:]
}

// newSession returns a cookie value for role ro, valid until exp.
func (a Auth) newSession(ro role, exp time.Time) string {
	body := strconv.Itoa(int(ro)) + "." + strconv.FormatInt(exp.Unix(), 10)
	m := hmac.New(sha256.New, a.sessionKey(ro))
	m.Write([]byte(body))
	return body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// session checks a cookie value and returns its role (roleNone when invalid or expired).
func (a Auth) session(v string, now time.Time) role {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return roleNone
	}
	n, err1 := strconv.Atoi(parts[0])
	exp, err2 := strconv.ParseInt(parts[1], 10, 64)
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	ro := role(n)
	if err1 != nil || err2 != nil || err3 != nil || (ro != roleRead && ro != roleAdmin) || now.Unix() >= exp {
		return roleNone
	}
	key := a.sessionKey(ro)
	if key == nil {
		return roleNone
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, m.Sum(nil)) {
		return roleNone
	}
	return ro
}

// sameOrigin reports whether a browser request says it comes from this server's own
// pages: Sec-Fetch-Site same-origin, or an Origin whose host is the request's Host.
func sameOrigin(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// safeNext is a local path to go to after a login, or "/".
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.ContainsAny(next, "\r\n") {
		return "/"
	}
	return next
}
