package cursor

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
)

// Source produces a cursor's documents.
type Source interface {
	// Next returns the next document; ok is false when the source is exhausted. The document
	// must stay valid until the next call (callers copy it into the reply at once).
	Next(ctx context.Context) (doc bsoncore.Document, ok bool, err error)
	// SaveState releases everything tied to the current storage snapshot (the command layer
	// abandons the snapshot and drops its locks after it).
	SaveState()
	// RestoreState re-acquires what SaveState released, at the start of a getMore (locks are
	// already held again). It fails (e.g. QueryPlanKilled) when the collection went away.
	RestoreState(ctx context.Context) error
	// Close releases the source for good.
	Close()
}

// Cursor is one open cursor. The fields set before Register are immutable afterwards; the
// manager guards the rest.
type Cursor struct {
	// NS is the namespace getMore must name ("db.coll"; "db.$cmd.listCollections" style for
	// command cursors).
	NS     string
	Source Source
	// Tailable and AwaitData are find's flags (capped collections only).
	Tailable, AwaitData bool
	// NoTimeout exempts the cursor from the idle reaper (find's noCursorTimeout).
	NoTimeout bool
	// LSID is the session the cursor was opened under (lsid's id then uid, 48 bytes; the
	// command layer compares it with each getMore's), nil if none;
	// TxnNumber its transaction, when in one.
	LSID      []byte
	TxnNumber *int64
	// Command is the originating command (a copy), for currentOp, the slow-op log and
	// getMore's check that the user still holds the privileges it needed.
	Command bsoncore.Document
	// Users are the users authenticated on the connection that opened the cursor (none
	// without authentication): only they may getMore it, and only they, or a user with
	// killAnyCursor, may kill it (MongoDB's ClientCursor authenticated users).
	Users []auth.UserName
	// Extra is owner-defined state (e.g. the command layer's lock/RecoveryUnit holder).
	Extra any

	// NReturned counts documents returned so far (owner-updated while pinned).
	NReturned int64
	// stash holds a document read but left out of a batch because it would overflow the
	// reply; it is the first document of the next batch.
	stash bsoncore.Document

	id       int64
	created  time.Time
	lastUsed time.Time // guarded by Manager.mu
	pinned   bool      // guarded by Manager.mu
	killed   atomic.Bool
}

// ID returns the cursor id (0 before Register).
func (c *Cursor) ID() int64 { return c.id }

// Killed reports whether the cursor was killed while pinned; the getMore using it stops with
// CursorKilled.
func (c *Cursor) Killed() bool { return c.killed.Load() }

// Metrics are the serverStatus metrics.cursor counters the manager keeps up to date. Nil
// fields are ignored.
type Metrics struct {
	Open, OpenNoTimeout, OpenPinned, TimedOut, TotalOpened *atomic.Int64
}

func add(c *atomic.Int64, d int64) {
	if c != nil {
		c.Add(d)
	}
}

// Options configure a Manager.
type Options struct {
	// Timeout returns the idle timeout (cursorTimeoutMillis, read on every reap so a runtime
	// setParameter applies); nil means 10 minutes.
	Timeout func() time.Duration
	// Now is the clock (time.Now when nil).
	Now     func() time.Time
	Metrics Metrics
}

// Manager owns a server's open cursors. Safe for concurrent use.
type Manager struct {
	opts     Options
	mu       sync.Mutex
	cursors  map[int64]*Cursor
	lastReap time.Time

	// inserts and awaitStats serve awaitData getMores (await.go).
	inserts    insertNotifier
	awaitStats AwaitDataStats
}

// NewManager returns an empty manager.
func NewManager(opts Options) *Manager {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout == nil {
		opts.Timeout = func() time.Duration { return 10 * time.Minute }
	}
	return &Manager{opts: opts, cursors: map[int64]*Cursor{}}
}

func randomID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// Positive ids, as mongod's (it masks the sign bit off its random generator's output).
	return int64(binary.LittleEndian.Uint64(b[:]) &^ (1 << 63))
}

// Register adds c, unpinned, and returns its new id.
func (m *Manager) Register(c *Cursor) int64 {
	m.maybeReap()
	now := m.opts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		id := randomID()
		if _, dup := m.cursors[id]; id == 0 || dup {
			continue
		}
		c.id, c.created, c.lastUsed = id, now, now
		m.cursors[id] = c
		break
	}
	add(m.opts.Metrics.Open, 1)
	add(m.opts.Metrics.TotalOpened, 1)
	if c.NoTimeout {
		add(m.opts.Metrics.OpenNoTimeout, 1)
	}
	return c.id
}

// Get returns the cursor with id without pinning it (currentOp, ns checks).
func (m *Manager) Get(id int64) (*Cursor, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.cursors[id]
	return c, ok
}

// NotFound is the error for an unknown cursor id.
func NotFound(id int64) error {
	return mongoerr.Newf(mongoerr.CursorNotFound, "cursor id %d not found", id)
}

// Pin reserves the cursor for one getMore: CursorNotFound when there is no such cursor,
// CursorInUse when another operation has it pinned.
func (m *Manager) Pin(id int64) (*Cursor, error) {
	m.maybeReap()
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.cursors[id]
	if !ok {
		return nil, NotFound(id)
	}
	if c.pinned {
		return nil, mongoerr.Newf(mongoerr.CursorInUse, "cursor id %d is already in use", id)
	}
	c.pinned = true
	add(m.opts.Metrics.OpenPinned, 1)
	return c, nil
}

// Unpin returns a pinned cursor to the idle set; if it was killed meanwhile (or done is true,
// i.e. exhausted or failed), it is removed and its source closed instead.
func (m *Manager) Unpin(c *Cursor, done bool) {
	m.mu.Lock()
	if c.pinned {
		c.pinned = false
		add(m.opts.Metrics.OpenPinned, -1)
	}
	c.lastUsed = m.opts.Now()
	remove := done || c.killed.Load()
	if remove {
		m.removeLocked(c)
	}
	m.mu.Unlock()
	if remove {
		c.Source.Close()
	}
}

// removeLocked deletes c from the table (if still there) and updates the metrics.
func (m *Manager) removeLocked(c *Cursor) bool {
	if cur, ok := m.cursors[c.id]; !ok || cur != c {
		return false
	}
	delete(m.cursors, c.id)
	add(m.opts.Metrics.Open, -1)
	if c.NoTimeout {
		add(m.opts.Metrics.OpenNoTimeout, -1)
	}
	return true
}

// Kill kills the given cursors (killCursors). An idle cursor is removed and closed at once; a
// pinned one is marked killed, its getMore fails with CursorKilled and the cursor is removed at
// Unpin. MongoDB reports both as killed. Every id lands in killed or notFound here: alive and
// unknown exist for reply-shape compatibility (always empty on a standalone).
func (m *Manager) Kill(ids []int64) (killed, notFound, alive, unknown []int64) {
	killed, notFound, alive, unknown = []int64{}, []int64{}, []int64{}, []int64{}
	var toClose []*Cursor
	m.mu.Lock()
	for _, id := range ids {
		c, ok := m.cursors[id]
		if !ok {
			notFound = append(notFound, id)
			continue
		}
		killed = append(killed, id)
		c.killed.Store(true)
		if !c.pinned {
			m.removeLocked(c)
			toClose = append(toClose, c)
		}
	}
	m.mu.Unlock()
	for _, c := range toClose {
		c.Source.Close()
	}
	return killed, notFound, alive, unknown
}

// KillIf kills every cursor pred selects (killSessions, dropping a collection); it returns how
// many it killed.
func (m *Manager) KillIf(pred func(c *Cursor) bool) int {
	var ids []int64
	m.mu.Lock()
	for id, c := range m.cursors {
		if pred(c) {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	k, _, _, _ := m.Kill(ids)
	return len(k)
}

// Len returns the number of open cursors.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cursors)
}

// ReapIdle kills the unpinned cursors without NoTimeout idle for longer than the timeout at
// now; it returns how many it killed (serverStatus metrics.cursor.timedOut).
func (m *Manager) ReapIdle(now time.Time) int {
	timeout := m.opts.Timeout()
	var toClose []*Cursor
	m.mu.Lock()
	m.lastReap = now
	for _, c := range m.cursors {
		if c.pinned || c.NoTimeout || now.Sub(c.lastUsed) <= timeout {
			continue
		}
		c.killed.Store(true)
		m.removeLocked(c)
		toClose = append(toClose, c)
	}
	m.mu.Unlock()
	for _, c := range toClose {
		c.Source.Close()
	}
	add(m.opts.Metrics.TimedOut, int64(len(toClose)))
	return len(toClose)
}

// maybeReap runs ReapIdle when the last reap is more than a second old.
func (m *Manager) maybeReap() {
	now := m.opts.Now()
	m.mu.Lock()
	due := now.Sub(m.lastReap) >= time.Second
	m.mu.Unlock()
	if due {
		m.ReapIdle(now)
	}
}

// Run reaps idle cursors every interval until ctx is done (MongoDB's ClientCursorMonitor runs
// every clientCursorMonitorFrequencySecs = 4 s).
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.ReapIdle(m.opts.Now())
		}
	}
}

// Close kills every cursor (shutdown).
func (m *Manager) Close() {
	m.KillIf(func(*Cursor) bool { return true })
}

// SliceSource returns a Source over precomputed documents (listCollections, listIndexes).
func SliceSource(docs []bsoncore.Document) Source { return &sliceSource{docs: docs} }

type sliceSource struct {
	docs []bsoncore.Document
	i    int
}

func (s *sliceSource) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if s.i >= len(s.docs) {
		return nil, false, nil
	}
	d := s.docs[s.i]
	s.i++
	return d, true, nil
}
func (s *sliceSource) SaveState()                         {}
func (s *sliceSource) RestoreState(context.Context) error { return nil }
func (s *sliceSource) Close()                             { s.docs = nil }

// Sessions returns the session keys (Cursor.LSID) of the open cursors opened in a session,
// each once (the logical session cache's refresh looks for expired ones among them).
func (m *Manager) Sessions() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	var out [][]byte
	for _, c := range m.cursors {
		if c.LSID == nil || seen[string(c.LSID)] {
			continue
		}
		seen[string(c.LSID)] = true
		out = append(out, c.LSID)
	}
	return out
}
