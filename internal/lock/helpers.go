package lock

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"humongo/internal/mongoerr"
)

// Scope is the set of locks one helper call acquired — the RAII scope of MongoDB's
// Lock::GlobalLock, DBLock and CollectionLock. Release undoes exactly those acquisitions, so
// nested scopes compose through recursion counts. Inside a write unit of work Release defers
// IX/X releases like Unlock does. The zero Scope releases nothing.
type Scope struct {
	l     *Locker
	res   [5]ResourceID // PBWM, RSTL, Global, Database, Collection: no allocation
	n     uint8
	extra []ResourceID // acquisitions beyond the fifth (LockCollections)
}

func (s *Scope) push(r ResourceID) {
	if s.n < uint8(len(s.res)) {
		s.res[s.n] = r
		s.n++
		return
	}
	s.extra = append(s.extra, r)
}

// Release unlocks the scope's locks bottom-up. It is idempotent.
func (s *Scope) Release() error {
	var first error
	for len(s.extra) > 0 {
		r := s.extra[len(s.extra)-1]
		s.extra = s.extra[:len(s.extra)-1]
		if err := s.l.Unlock(r); err != nil && first == nil {
			first = err
		}
	}
	for s.n > 0 {
		s.n--
		if err := s.l.Unlock(s.res[s.n]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// GlobalOptions tune GlobalLock.
type GlobalOptions struct {
	// SkipRSTL leaves out the RSTL (for operations that must not be blocked by, or block, a
	// replication state transition).
	SkipRSTL bool
}

// GlobalLock takes the Global-type locks top-down: PBWM in IS/IX (unless the Locker does not
// conflict with secondary batch application), RSTL in IX, then Global in mode. If the Global
// lock is already held, only it is re-acquired (the enclosing scope holds the others).
func (l *Locker) GlobalLock(ctx context.Context, mode Mode) (Scope, error) {
	return l.GlobalLockWith(ctx, mode, GlobalOptions{})
}

// GlobalLockWith is GlobalLock with options.
func (l *Locker) GlobalLockWith(ctx context.Context, mode Mode, opts GlobalOptions) (Scope, error) {
	s := Scope{l: l}
	if !l.holds(ResourceGlobal) {
		// Admission first, as MongoDB's lockGlobal: the ticket is held until the Global lock
		// is released for good (release), and given back here if the locks below fail.
		if l.adm != nil {
			kind, err := l.adm.acquire(ctx, l.m.Tickets(), mode, l.deadlineKind)
			if err != nil {
				return Scope{}, err
			}
			l.admTicket = kind
		}
		if !l.noPBWM {
			if err := l.Lock(ctx, ResourcePBWM, intentMode(mode)); err != nil {
				l.releaseTicket()
				return Scope{}, err
			}
			s.push(ResourcePBWM)
		}
		if !opts.SkipRSTL {
			if err := l.Lock(ctx, ResourceRSTL, ModeIX); err != nil {
				_ = s.Release()
				l.releaseTicket()
				return Scope{}, err
			}
			s.push(ResourceRSTL)
		}
	}
	if err := l.Lock(ctx, ResourceGlobal, mode); err != nil {
		_ = s.Release()
		if !l.holds(ResourceGlobal) {
			l.releaseTicket()
		}
		return Scope{}, err
	}
	s.push(ResourceGlobal)
	return s, nil
}

// DBLock takes the Global lock in the intent mode of mode, then database db in mode.
func (l *Locker) DBLock(ctx context.Context, db string, mode Mode) (Scope, error) {
	return l.dbLock(ctx, DatabaseResource(db), mode)
}

func (l *Locker) dbLock(ctx context.Context, res ResourceID, mode Mode) (Scope, error) {
	s, err := l.GlobalLock(ctx, intentMode(mode))
	if err != nil {
		return Scope{}, err
	}
	if err := l.Lock(ctx, res, mode); err != nil {
		_ = s.Release()
		return Scope{}, err
	}
	s.push(res)
	return s, nil
}

// CollectionLock takes Global and the database of ns in the intent mode of mode, then
// collection ns ("db.coll") in mode.
func (l *Locker) CollectionLock(ctx context.Context, ns string, mode Mode) (Scope, error) {
	return l.CollectionLockID(ctx, CollectionResource(ns), mode)
}

// CollectionLockID is CollectionLock for a precomputed collection id (saves hashing the
// namespace on hot paths).
func (l *Locker) CollectionLockID(ctx context.Context, coll ResourceID, mode Mode) (Scope, error) {
	db, ok := coll.Parent()
	if !ok {
		return Scope{}, mongoerr.Newf(mongoerr.InternalError, "%w: %v is not a collection", ErrMisuse, coll)
	}
	s, err := l.dbLock(ctx, db, intentMode(mode))
	if err != nil {
		return Scope{}, err
	}
	if err := l.Lock(ctx, coll, mode); err != nil {
		_ = s.Release()
		return Scope{}, err
	}
	s.push(coll)
	return s, nil
}

// dbOf returns the database part of namespace ns.
func dbOf(ns string) string {
	if i := strings.IndexByte(ns, '.'); i >= 0 {
		return ns[:i]
	}
	return ns
}

// LockCollections locks several collections, possibly in several databases, for one operation
// (e.g. $lookup, renameCollection across databases): Global in the intent mode, then every
// distinct Database in the intent mode, then every distinct Collection in mode, each level in
// ResourceID order. Every Locker that follows this order and the single-chain helpers agrees
// on one total order (level, id), so these acquisitions cannot deadlock with each other.
func (l *Locker) LockCollections(ctx context.Context, mode Mode, namespaces ...string) (Scope, error) {
	colls := make([]ResourceID, 0, len(namespaces))
	dbs := make([]ResourceID, 0, len(namespaces))
	for _, ns := range namespaces {
		c := CollectionResource(ns)
		colls = append(colls, c)
		dbs = append(dbs, ResourceID{id: c.parent})
	}
	byID := func(a, b ResourceID) int { return cmp.Compare(a.id, b.id) }
	slices.SortFunc(colls, byID)
	colls = slices.Compact(colls)
	slices.SortFunc(dbs, byID)
	dbs = slices.Compact(dbs)

	s, err := l.GlobalLock(ctx, intentMode(mode))
	if err != nil {
		return Scope{}, err
	}
	for _, group := range [...]struct {
		ids  []ResourceID
		mode Mode
	}{{dbs, intentMode(mode)}, {colls, mode}} {
		for _, r := range group.ids {
			if err := l.Lock(ctx, r, group.mode); err != nil {
				_ = s.Release()
				return Scope{}, err
			}
			s.push(r)
		}
	}
	return s, nil
}
