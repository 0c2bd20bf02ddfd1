// The host Rewriter: every connection the internal client opens to another server goes
// through one, so that tests can route each server's view of another through a per-link proxy
// and partition links (ARCHITECTURE.md, testing tier 5; spec/replication.md, "Elections" and
// "Rollback", whose liveness and rollback rules only show when a primary is cut off from a
// majority while clients can still reach it).
//
// A Rewriter maps a host string, as a replica-set config or a seed list spells it, to the
// address actually dialed; with no rewrites (production) it dials the host itself. Each server
// owns one (coord.Options.Dialer), so two servers in one process have separate maps. The map
// is replaced as a whole by the test-only command testingReplicaSetHostRewrites
// (internal/commands), and a change closes every open connection whose target it moved, so
// that the driver reconnects through the new target at once instead of keeping pooled
// connections to the old one.
//
// Invariants: the map is immutable once published (an atomic pointer, so a dial costs one
// load and one map lookup); every connection a Rewriter returns is tracked until it is closed,
// and only by the Rewriter that dialed it.

package client

import (
	"context"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"humongo/internal/mongoerr"
)

// Rewriter dials member hosts through an optional host → address rewrite map. The zero value
// is ready to use and rewrites nothing.
type Rewriter struct {
	// rewrites is the current map, never modified after it is stored (nil: none).
	rewrites atomic.Pointer[map[string]string]
	// Dialer dials the rewritten address (the zero net.Dialer if nil).
	Dialer *net.Dialer
	// Security is how the owning server's internal clients prove themselves to the servers
	// they dial (nil: neither TLS nor keyfile). Set once, before the first dial.
	Security *Security

	// mu guards conns and serializes Set with the registration of new connections, so a
	// connection dialed to a target that a concurrent Set moves away is either closed by
	// that Set or dialed after it (see DialContext).
	mu    sync.Mutex
	conns map[*conn]struct{}
}

// Rewrite returns the address to dial for host: its rewrite if one is set, else host.
func (r *Rewriter) Rewrite(host string) string {
	if m := r.rewrites.Load(); m != nil {
		if to, ok := (*m)[host]; ok {
			return to
		}
	}
	return host
}

// Rewrites returns a copy of the current map (empty when none is set).
func (r *Rewriter) Rewrites() map[string]string {
	out := map[string]string{}
	if m := r.rewrites.Load(); m != nil {
		maps.Copy(out, *m)
	}
	return out
}

// Set replaces the whole map with m (nil or empty: no rewrites) and closes every open
// connection whose target changed, returning the previous map and how many connections it
// closed. Every key and value must be a "host:port" address; otherwise nothing changes and the
// error is BadValue.
func (r *Rewriter) Set(m map[string]string) (previous map[string]string, closed int, err error) {
	for from, to := range m {
		if err := ValidateHost(from); err != nil {
			return nil, 0, err
		}
		if err := ValidateHost(to); err != nil {
			return nil, 0, err
		}
	}
	next := maps.Clone(m)
	r.mu.Lock()
	previous = r.Rewrites()
	if len(next) == 0 {
		r.rewrites.Store(nil)
	} else {
		r.rewrites.Store(&next)
	}
	var stale []*conn
	for c := range r.conns {
		if r.Rewrite(c.host) != c.target {
			stale = append(stale, c)
			delete(r.conns, c)
		}
	}
	r.mu.Unlock()
	// Closing outside the lock: a net.Conn's Close may block briefly, and conn.Close takes
	// the lock to unregister.
	for _, c := range stale {
		_ = c.Conn.Close()
	}
	return previous, len(stale), nil
}

// DialContext dials address (a member's host string) at its rewritten target. It implements
// the driver's options.ContextDialer.
func (r *Rewriter) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	target := r.Rewrite(address)
	d := r.Dialer
	if d == nil {
		d = &net.Dialer{}
	}
	nc, err := d.DialContext(ctx, network, target)
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, r: r, host: address, target: target}
	r.mu.Lock()
	// A Set between the dial and here may have moved the target: such a connection is
	// dropped like those Set closed, so no connection outlives a change of its target.
	if r.Rewrite(address) != target {
		r.mu.Unlock()
		_ = nc.Close()
		return nil, mongoerr.Newf(mongoerr.HostUnreachable, "the route to %s changed while connecting to %s", address, target)
	}
	if r.conns == nil {
		r.conns = map[*conn]struct{}{}
	}
	r.conns[c] = struct{}{}
	r.mu.Unlock()
	return c, nil
}

// Open returns how many connections dialed by r are open now.
func (r *Rewriter) Open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// conn is a dialed connection, tracked until closed so that a rewrite change can close it.
type conn struct {
	net.Conn
	r            *Rewriter
	host, target string
	once         sync.Once
}

func (c *conn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.r.mu.Lock()
		delete(c.r.conns, c)
		c.r.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// ValidateHost checks that s is "host:port" with a non-empty host and a port in 1..65535, the
// form of a member's host string; otherwise it returns BadValue.
func ValidateHost(s string) error {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return mongoerr.Newf(mongoerr.BadValue, "%q is not a host:port address: %v", s, err)
	}
	if h == "" {
		return mongoerr.Newf(mongoerr.BadValue, "%q has no host name", s)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return mongoerr.Newf(mongoerr.BadValue, "%q: port must be a number between 1 and 65535", s)
	}
	return nil
}
