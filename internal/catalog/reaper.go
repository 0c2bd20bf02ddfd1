package catalog

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/storage"
)

// dropPendingIdentName is the timestamped table listing idents whose drop is pending (phase
// one done, phase two not yet). A record is written in the same unit as the catalog change
// that drops the ident, so RecoverToStable rolls the two back together: after recovery every
// record names an ident whose catalog entry is really gone as of the stable timestamp.
const dropPendingIdentName = "_mdb_drop_pending"

// pendingIdent describes an ident whose drop was requested.
type pendingIdent struct {
	ident string
	ns    string
	index string // empty for a collection's record store
	// untimestamped idents (local database) have no history: nothing can read them at an
	// older timestamp, so they are reaped as soon as nobody holds them.
	untimestamped bool
}

// DropPendingIdent is a drop-pending ident as reported by Catalog.DropPending.
type DropPendingIdent struct {
	Ident string
	NS    string
	Index string // empty for a collection's record store
	// DropTimestamp is the drop's commit timestamp (for idents found at startup or after
	// recovery: an upper bound of it, see doc.go).
	DropTimestamp optime.Timestamp
}

type dropPending struct {
	pendingIdent
	dropTs optime.Timestamp
}

// reaper is phase two of the two-phase drop (the spec's KVDropPendingIdentReaper together
// with the TimestampMonitor that wakes it).
type reaper struct {
	c *Catalog

	// passMu serializes reap passes with catalog reloads.
	passMu sync.Mutex

	mu      sync.Mutex
	pending map[string]dropPending // by ident
	pins    map[string]int         // MarkIdentInUse references
	// stale are drop-pending records whose ident is gone; they are deleted by the next DDL
	// unit (see cleanupStaleRecords) rather than by a write of our own, because a background
	// commit would need a timestamp of its own.
	stale []string

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func newReaper(c *Catalog) *reaper {
	return &reaper{
		c:       c,
		pending: map[string]dropPending{},
		pins:    map[string]int{},
		kick:    make(chan struct{}, 1),
	}
}

// start runs the reaper goroutine until stop.
func (r *reaper) start(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan struct{})
	go r.run(ctx, interval)
}

func (r *reaper) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.cancel = nil
}

// run wakes on every drop commit (kick) and periodically, because the oldest and stable
// timestamps move without telling anyone (MongoDB's TimestampMonitor polls them too).
func (r *reaper) run(ctx context.Context, interval time.Duration) {
	defer close(r.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
		if r.hasPending() {
			r.pass()
		}
	}
}

func (r *reaper) hasPending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) > 0
}

// add registers idents dropped by a unit that committed at ts.
func (r *reaper) add(idents []pendingIdent, ts optime.Timestamp) {
	r.mu.Lock()
	for _, p := range idents {
		r.pending[p.ident] = dropPending{pendingIdent: p, dropTs: ts}
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// reapable decides whether an ident dropped at dropTs may lose its data now:
//   - untimestamped idents: always (no reads at older timestamps exist);
//   - no oldest and no stable timestamp (standalone without timestamp management): always —
//     nothing reads at a timestamp older than "now" there (MongoDB rejects snapshot and
//     atClusterTime reads on standalones), and operations still using the ident pin it with
//     MarkIdentInUse;
//   - otherwise: dropTs < oldest (no supported read can see it) and, when a stable timestamp
//     is set, dropTs < stable (recovery to stable never resurrects the entry).
func reapable(p dropPending, oldest, stable optime.Timestamp) bool {
	switch {
	case p.untimestamped:
		return true
	case oldest.IsNull() && stable.IsNull():
		return true
	case oldest.IsNull():
		return false
	}
	return p.dropTs < oldest && (stable.IsNull() || p.dropTs < stable)
}

// pass drops every reapable, unpinned ident and returns how many it dropped.
func (r *reaper) pass() int {
	r.passMu.Lock()
	defer r.passMu.Unlock()
	e := r.c.e
	oldest, stable := e.OldestTimestamp(), e.StableTimestamp()
	r.mu.Lock()
	var cands []dropPending
	for _, p := range r.pending {
		if reapable(p, oldest, stable) {
			cands = append(cands, p)
		}
	}
	r.mu.Unlock()
	if len(cands) == 0 {
		return 0
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].ident < cands[j].ident })
	referenced := referencedIdents(r.c.latest.Load())
	n := 0
	for _, p := range cands {
		// Hold mu across the drop so MarkIdentInUse cannot pin an ident being dropped.
		r.mu.Lock()
		if r.pins[p.ident] > 0 {
			r.mu.Unlock()
			continue
		}
		if referenced[p.ident] {
			// Cannot happen unless a reload resurrected the entry; never drop live data.
			delete(r.pending, p.ident)
			r.mu.Unlock()
			continue
		}
		err := e.DropIdent(p.ident)
		if err == nil || errors.Is(err, storage.ErrNoSuchIdent) {
			delete(r.pending, p.ident)
			if !p.untimestamped {
				r.stale = append(r.stale, p.ident)
			}
			if err == nil {
				n++
			}
		}
		r.mu.Unlock()
		if err != nil && !errors.Is(err, storage.ErrNoSuchIdent) {
			r.c.log.Warn("dropping drop-pending ident failed; will retry", "ident", p.ident, "ns", p.ns, "err", err)
		} else if err == nil {
			r.c.log.Info("dropped drop-pending ident", "ident", p.ident, "ns", p.ns, "index", p.index,
				"dropTimestamp", p.dropTs.String())
		}
	}
	return n
}

// referencedIdents returns every ident named by s.
func referencedIdents(s *Snapshot) map[string]bool {
	out := make(map[string]bool, len(s.byID)*2)
	for _, m := range s.byID {
		out[m.Ident] = true
		for i := range m.Indexes {
			out[m.Indexes[i].Ident] = true
		}
	}
	return out
}

// persistDropPending records idents as drop pending in ru's unit (timestamped ones only:
// untimestamped idents are found as orphans by startup reconciliation if we crash first).
func (c *Catalog) persistDropPending(ru *storage.RecoveryUnit, idents []pendingIdent) error {
	for _, p := range idents {
		if p.untimestamped {
			continue
		}
		idx, dst := bsoncore.AppendDocumentStart(nil)
		dst = bsoncore.AppendStringElement(dst, "ident", p.ident)
		dst = bsoncore.AppendStringElement(dst, "ns", p.ns)
		if p.index != "" {
			dst = bsoncore.AppendStringElement(dst, "index", p.index)
		}
		dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
		if err := ru.Put(dropPendingIdentName, []byte(p.ident), dst); err != nil {
			return err
		}
	}
	return nil
}

// cleanupStaleRecords deletes drop-pending records of already dropped idents inside st's
// DDL unit (which has a proper commit timestamp). On rollback they are requeued.
func (c *Catalog) cleanupStaleRecords(st *unitState) {
	r := c.reaper
	r.mu.Lock()
	stale := r.stale
	r.stale = nil
	r.mu.Unlock()
	for i, id := range stale {
		if err := st.ru.Delete(dropPendingIdentName, []byte(id)); err != nil {
			r.mu.Lock()
			r.stale = append(r.stale, stale[i:]...)
			r.mu.Unlock()
			return
		}
		st.cleaned = append(st.cleaned, id)
	}
}

// requeueStale gives records back after the unit that was to delete them rolled back.
func (r *reaper) requeueStale(ids []string) {
	if len(ids) == 0 {
		return
	}
	r.mu.Lock()
	r.stale = append(r.stale, ids...)
	r.mu.Unlock()
}

// MarkIdentInUse pins ident so the reaper does not drop it until release is called (the
// spec's KVDropPendingIdentReaper::markIdentInUse), e.g. while a historical instantiation
// reads a dropped collection. ok is false when the ident no longer exists.
func (c *Catalog) MarkIdentInUse(ident string) (release func(), ok bool) {
	r := c.reaper
	r.mu.Lock()
	defer r.mu.Unlock()
	if !c.e.HasIdent(ident) {
		return func() {}, false
	}
	r.pins[ident]++
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.pins[ident]--; r.pins[ident] <= 0 {
				delete(r.pins, ident)
			}
			r.mu.Unlock()
		})
	}, true
}

// ReapNow runs one reaper pass synchronously and returns the number of idents dropped.
func (c *Catalog) ReapNow() int { return c.reaper.pass() }

// DropPending lists the idents waiting for phase two, sorted by ident.
func (c *Catalog) DropPending() []DropPendingIdent {
	r := c.reaper
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]DropPendingIdent, 0, len(r.pending))
	for _, p := range r.pending {
		out = append(out, DropPendingIdent{Ident: p.ident, NS: p.ns, Index: p.index, DropTimestamp: p.dropTs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ident < out[j].Ident })
	return out
}

// isCatalogOwnedIdent reports whether reconciliation may drop ident when no catalog entry
// references it: only collection and index tables are the catalog's; other idents (the
// catalog's own tables, storage-internal ones, index-build temporary tables) belong to
// someone else.
func isCatalogOwnedIdent(ident string) bool {
	return strings.HasPrefix(ident, "collection-") || strings.HasPrefix(ident, "index-")
}

// TemporaryIdentPrefix names tables that live only while the process that created them runs
// (index builds' side-writes, skipped-record and duplicate-key tables): startup
// reconciliation drops every one of them. Nothing may keep state that must survive a
// restart in a table with this prefix.
const TemporaryIdentPrefix = "internal-"

func isTemporaryIdent(ident string) bool { return strings.HasPrefix(ident, TemporaryIdentPrefix) }
