// Package lsc is the logical session cache (MongoDB's LogicalSessionCache; spec: sharding.md
// "Logical sessions", "The logical session cache"): the in-memory set of sessions used on
// this node since the last refresh, which startSession creates, every command carrying an
// `lsid` vivifies, refreshSessions touches and endSessions marks as ending.
//
// A refresh (refresh.go; run every logicalSessionRefreshMillis by the server, or at once by
// refreshLogicalSessionCacheNow) hands the recently used sessions and the sessions of
// running operations to the sessions collection (config.system.sessions, whose TTL index
// expires idle ones), removes the ended ones from it, and kills the cursors of the ended
// sessions and of the sessions whose record has expired. The reap (Reap) removes the
// config.transactions entries of sessions that are gone from the sessions collection.
//
// Killing sessions (killSessions, killAllSessions, killAllSessionsByPattern) is the
// server's: it interrupts their operations and cursors and calls the hooks registered with
// OnKill, through which the transaction layer aborts their transactions.
//
// Sessions are keyed by (id UUID, uid), uid being SHA-256 of the authenticated user name
// ("user@db"); with no authentication every session's uid is SHA-256 of the empty string, as
// in mongod. The transaction layer (internal/txn) keeps its per-session state keyed the same
// way.
package lsc

import (
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
)

// Key identifies a session.
type Key struct {
	ID  catalog.UUID
	UID [32]byte
}

// String prints k as MongoDB prints a LogicalSessionId in messages: id, uid (base64),
// txnNumber and txnUUID separated by " - " (the last two empty for a client's session).
func (k Key) String() string {
	return k.ID.String() + " - " + base64.StdEncoding.EncodeToString(k.UID[:]) + " -  - "
}

// NoUserUID is the uid of sessions started without authentication: SHA-256("").
var NoUserUID = sha256.Sum256(nil)

// Record is a session used since the last refresh.
type Record struct {
	Key     Key
	User    string // "" without authentication
	LastUse time.Time
}

// Cache holds the sessions used since the last refresh and the sessions ended since then.
// Safe for concurrent use.
type Cache struct {
	mu        sync.Mutex
	active    map[Key]*Record   // guarded by mu
	ending    map[Key]time.Time // when endSessions named them
	timeout   time.Duration
	max       int
	now       func() time.Time
	lastSweep time.Time
	stats     Stats

	refreshMu sync.Mutex // serializes Refresh and Reap

	hookMu    sync.Mutex
	killHooks []func(match func(Key) bool)
	reapHooks []func(keys []Key)
}

// sweepEvery bounds how often a cache that is never refreshed (a router without a sessions
// collection yet) drops records idle for longer than the timeout.
const sweepEvery = time.Second

// New returns a cache whose sessions expire after timeout (localLogicalSessionTimeoutMinutes)
// and that holds at most max sessions (maxSessions) between refreshes. now is the clock
// (time.Now when nil).
func New(timeout time.Duration, max int, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	c := &Cache{active: map[Key]*Record{}, ending: map[Key]time.Time{}, timeout: timeout, max: max, now: now}
	c.stats.LastSessionsCollectionJobTimestamp = now()
	c.stats.LastTransactionReaperJobTimestamp = c.stats.LastSessionsCollectionJobTimestamp
	return c
}

// Timeout returns the session timeout.
func (c *Cache) Timeout() time.Duration { return c.timeout }

// Now returns the cache's clock reading.
func (c *Cache) Now() time.Time { return c.now() }

// Start creates a new session for user (startSession).
func (c *Cache) Start(user string) (Record, error) {
	k := Key{ID: catalog.NewUUID(), UID: uidOf(user)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.vivifyLocked(k, user); err != nil {
		return Record{}, err
	}
	return *c.active[k], nil
}

// Vivify records a use of the session (adding it to the cache if it is not there), as any
// command with an lsid does.
func (c *Cache) Vivify(k Key, user string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.vivifyLocked(k, user)
}

// VivifyAll vivifies every session of keys (refreshSessions).
func (c *Cache) VivifyAll(keys []Key, user string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if err := c.vivifyLocked(k, user); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cache) vivifyLocked(k Key, user string) error {
	now := c.now()
	c.sweepLocked(now)
	if r, ok := c.active[k]; ok {
		r.LastUse = now
		return nil
	}
	if len(c.active) >= c.max {
		return mongoerr.Newf(mongoerr.TooManyLogicalSessions,
			"Unable to add session ID %s into the cache because the number of active sessions is too high", k.ID)
	}
	c.active[k] = &Record{Key: k, User: user, LastUse: now}
	return nil
}

// End marks sessions as ending (endSessions): the next refresh removes them from the
// sessions collection and kills their cursors. Unknown ids are accepted.
func (c *Cache) End(keys []Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.sweepLocked(now)
	for _, k := range keys {
		c.ending[k] = now
	}
}

// Records returns the sessions used since the last refresh ($listLocalSessions).
func (c *Cache) Records() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(c.now())
	out := make([]Record, 0, len(c.active))
	for _, r := range c.active {
		out = append(out, *r)
	}
	return out
}

// Len returns the number of sessions used since the last refresh (serverStatus
// logicalSessionRecordCache.activeSessionsCount).
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(c.now())
	return len(c.active)
}

// Has reports whether the session was used since the last refresh.
func (c *Cache) Has(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(c.now())
	_, ok := c.active[k]
	return ok
}

// Ending reports whether the session was ended since the last refresh.
func (c *Cache) Ending(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ending[k]
	return ok
}

// sweepLocked drops records idle and ended sessions older than the timeout, at most once per
// sweepEvery: a refresh normally takes them first; this bounds a cache nobody refreshes (a
// router's, until it has a sessions collection).
func (c *Cache) sweepLocked(now time.Time) {
	if now.Sub(c.lastSweep) < sweepEvery {
		return
	}
	c.lastSweep = now
	for k, r := range c.active {
		if now.Sub(r.LastUse) >= c.timeout {
			delete(c.active, k)
		}
	}
	for k, at := range c.ending {
		if now.Sub(at) >= c.timeout {
			delete(c.ending, k)
		}
	}
}

// OnKill registers f to be called with a matcher whenever sessions are killed
// (killSessions, killAllSessions, killAllSessionsByPattern), after their operations and
// cursors were interrupted. The transaction layer registers the aborter of the matching
// sessions' open (unprepared) transactions here, MongoDB's
// killSessionsAbortUnpreparedTransactions. f must not block for long and must not call
// back into the kill path.
func (c *Cache) OnKill(f func(match func(Key) bool)) {
	c.hookMu.Lock()
	defer c.hookMu.Unlock()
	c.killHooks = append(c.killHooks, f)
}

// NotifyKill calls the OnKill hooks with match.
func (c *Cache) NotifyKill(match func(Key) bool) {
	c.hookMu.Lock()
	hooks := append([]func(func(Key) bool){}, c.killHooks...)
	c.hookMu.Unlock()
	for _, f := range hooks {
		f(match)
	}
}

// OnReap registers f to be called with the sessions whose config.transactions entries a reap
// removed, so the session catalog can forget them (MongoDB's reapSessionsOlderThan reaps the
// in-memory catalog too).
func (c *Cache) OnReap(f func(keys []Key)) {
	c.hookMu.Lock()
	defer c.hookMu.Unlock()
	c.reapHooks = append(c.reapHooks, f)
}

func (c *Cache) notifyReap(keys []Key) {
	c.hookMu.Lock()
	hooks := append([]func([]Key){}, c.reapHooks...)
	c.hookMu.Unlock()
	for _, f := range hooks {
		f(keys)
	}
}

// UIDOf returns the uid for user ("name@db"; "" without authentication).
func UIDOf(user string) [32]byte { return uidOf(user) }

func uidOf(user string) [32]byte {
	if user == "" {
		return NoUserUID
	}
	return sha256.Sum256([]byte(user))
}
