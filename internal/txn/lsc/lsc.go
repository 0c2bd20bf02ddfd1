// Package lsc is the logical session cache: the in-memory set of live logical sessions
// (MongoDB's LogicalSessionCache) that startSession creates, every command carrying an `lsid`
// vivifies, refreshSessions touches and endSessions/killSessions remove. A session that is not
// used for localLogicalSessionTimeoutMinutes expires.
//
// Sessions are keyed by (id UUID, uid), uid being SHA-256 of the authenticated user name; with
// no authentication every session's uid is SHA-256 of the empty string, as in mongod. The
// transaction layer (internal/txn) keeps its per-session state keyed the same way.
//
// Expiry is lazy: expired records are swept at most once per sweepEvery during other calls, so
// the cache owns no goroutine. (mongod persists sessions to config.system.sessions every
// 5 minutes; that arrives with the replicated catalog.)
package lsc

import (
	"crypto/sha256"
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

// NoUserUID is the uid of sessions started without authentication: SHA-256("").
var NoUserUID = sha256.Sum256(nil)

// Record is a live session.
type Record struct {
	Key     Key
	User    string // "" without authentication
	DB      string
	LastUse time.Time
}

// Cache holds live sessions. Safe for concurrent use.
type Cache struct {
	mu        sync.Mutex
	m         map[Key]*Record
	timeout   time.Duration
	max       int
	now       func() time.Time
	lastSweep time.Time
}

const sweepEvery = time.Second

// New returns a cache whose sessions expire after timeout and that holds at most max sessions
// (maxSessions). now is the clock (time.Now when nil).
func New(timeout time.Duration, max int, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{m: map[Key]*Record{}, timeout: timeout, max: max, now: now}
}

// Timeout returns the session timeout.
func (c *Cache) Timeout() time.Duration { return c.timeout }

// Start creates a new session for user.
func (c *Cache) Start(user string) (Record, error) {
	k := Key{ID: catalog.NewUUID(), UID: uidOf(user)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.vivifyLocked(k, user); err != nil {
		return Record{}, err
	}
	return *c.m[k], nil
}

// Vivify records a use of the session (creating it if unknown), as any command with an lsid does.
func (c *Cache) Vivify(k Key, user string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.vivifyLocked(k, user)
}

func (c *Cache) vivifyLocked(k Key, user string) error {
	now := c.now()
	c.sweepLocked(now)
	if r, ok := c.m[k]; ok {
		r.LastUse = now
		return nil
	}
	if len(c.m) >= c.max {
		return mongoerr.Newf(mongoerr.TooManyLogicalSessions,
			"Unable to add session into the cache because the number of active sessions is too high")
	}
	c.m[k] = &Record{Key: k, User: user, LastUse: now}
	return nil
}

// Refresh touches existing sessions; unknown ids are (re)created, as refreshSessions does.
func (c *Cache) Refresh(keys []Key, user string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if err := c.vivifyLocked(k, user); err != nil {
			return err
		}
	}
	return nil
}

// End removes sessions; unknown ids are ignored.
func (c *Cache) End(keys []Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.m, k)
	}
}

// KillMatching removes every session for which match returns true and returns how many.
func (c *Cache) KillMatching(match func(Record) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, r := range c.m {
		if match(*r) {
			delete(c.m, k)
			n++
		}
	}
	return n
}

// Len returns the number of live sessions.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(c.now())
	return len(c.m)
}

// Has reports whether the session is live.
func (c *Cache) Has(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(c.now())
	_, ok := c.m[k]
	return ok
}

// sweepLocked drops expired sessions, at most once per sweepEvery.
func (c *Cache) sweepLocked(now time.Time) {
	if now.Sub(c.lastSweep) < sweepEvery {
		return
	}
	c.lastSweep = now
	for k, r := range c.m {
		if now.Sub(r.LastUse) >= c.timeout {
			delete(c.m, k)
		}
	}
}

// UIDOf returns the uid for user.
func UIDOf(user string) [32]byte { return uidOf(user) }

func uidOf(user string) [32]byte {
	if user == "" {
		return NoUserUID
	}
	return sha256.Sum256([]byte(user))
}
