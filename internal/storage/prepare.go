package storage

// Prepared units: the storage half of prepared transactions (spec: replication.md "Cross-Shard
// Transactions and the Prepared State", "Prepare Conflicts"; WiredTiger's prepare_transaction as
// MongoDB's RecoveryUnit::prepareUnitOfWork uses it).
//
// Model. A prepared unit's writes stay where every unit's writes are until commit: in its
// in-memory buffer. Prepare(ts) freezes the buffer (no more writes, no more timestamps except
// the commit's) and publishes the unit's keys, with the prepare timestamp, in the engine's
// prepared set: an immutable sorted slice of conflict-table keys (ident prefix ‖ user key)
// behind an atomic pointer, rebuilt copy-on-write on each prepare, resolution and prune. The
// pointer is nil when nothing is prepared or recently committed, so a read on the hot path
// costs one atomic load and touches nothing else.
//
//   - Writers: the unit keeps owning its keys in the conflict table, so a writer gets
//     WriteConflict (112) at once, as with WiredTiger (WT_ROLLBACK on a prepared update).
//   - Readers (Get, and every cursor move, which checks the whole key interval it crossed, so
//     prepared inserts the reader's view does not contain are caught as well) whose read
//     timestamp is ≥ the prepare timestamp (ReadNoTimestamp reads at the maximum) get an error
//     matching ErrPrepareConflict instead of the old version; readers below the prepare
//     timestamp read the old version (the prepared writes would be invisible to them anyway).
//     A unit set to ignore prepare conflicts (SetPrepareConflictBehavior, MongoDB's local and
//     available reads) reads the pre-prepare state.
//   - Commit: the buffer is applied at the commit timestamp (≥ prepare) as one batch, then the
//     unit's entries in the prepared set turn "committed" with the commit's sequence, and
//     waiters are woken. A committed entry keeps conflicting with readers whose snapshot was
//     opened before the commit (commit sequence newer than the snapshot) and whose read
//     timestamp is ≥ the commit timestamp: their view lacks a commit they must see, and unlike
//     WiredTiger (which resolves a prepared update inside an open snapshot) a Pebble view
//     cannot gain it, so they retry with a new snapshot. Entries no open snapshot predates are
//     pruned (each second and on each change); the set then returns to nil.
//   - Rollback removes the unit's entries and wakes waiters; readers then read the old version.
//
// Waking. Each published set carries the "resolved" channel current when it was built; every
// resolution (and Close) closes it and starts a new one. A conflict error carries the channel
// of the set it was found in, so a waiter can never miss the resolution it waits for (the
// channel is closed by it or by an earlier one; a spurious wake costs one retry).
// PrepareConflictRetry waits on it; a conflict with an already committed entry carries a
// closed channel (retry at once).
//
// All-durable point. The prepare timestamp is NOT held in flight while the unit is prepared,
// unlike an ordinary unit's commit timestamp: the all-durable point is also the oplog
// visibility point, and holding it below the prepare timestamp would hide the prepare oplog
// entry itself (written at that timestamp by a separate unit) and every later entry from
// secondaries until the transaction resolves, so the prepare could never become majority
// committed and the coordinator never decide (MongoDB writes the prepare entry in a side
// transaction; WiredTiger's all_durable ignores prepared transactions until their commit).
// Readers at or above the prepare timestamp are protected by prepare conflicts instead, which
// is what makes committing "in the past" (commitTs below the all-durable point) safe. The
// commit timestamp is not registered in flight either, for the same reason; the durable
// timestamp (the commitTransaction oplog entry's, a fresh slot the caller reserves) is in
// flight from SetDurableTimestamp until the unit resolves.
//
// Durability and recovery. A prepared unit lives in memory only: the durability of a
// prepared transaction is its prepare oplog entry. Startup recovery, rollback and initial
// sync reconstruct it by re-applying the entry's operations into a new unit and calling
// Prepare with the entry's timestamp. Engine.Close with prepared units open loses them (their
// writes were never applied: a rollback) and wakes their waiters, who then fail with
// ErrClosed. RecoverToStable refuses to run while a unit is prepared (ErrSnapshotsOpen), so
// rollback aborts prepared units first and reconstructs them after. A prepared commit may land
// at or below stable while its commit oplog entry (the durable timestamp) is above it; such a
// commit writes a record that lets RecoverToStable undo it (see "prepared commits below the
// stable timestamp" below). GC: prepared writes are not in Pebble, and readers below the
// prepare timestamp read versions at or above oldest like any reader; the only GC change is
// the horizon those records lower.
//
// Readers at a fixed timestamp (a transaction's snapshot or majority reads) need not abandon
// their unit of work after a conflict: RefreshSnapshot gives them a newer view at the same
// timestamp, which can differ from the old one only by prepared commits.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"humongo/internal/optime"
)

// ErrPrepareConflict: a read met a key written by a prepared unit (or one committed after the
// reader's snapshot opened, at a timestamp the reader must see). Internal: the caller abandons
// its snapshot (rolling back its unit of work, if any), waits for the prepared unit to resolve
// and retries; PrepareConflictRetry does the waiting. It never reaches a client in MongoDB.
var ErrPrepareConflict = errors.New("storage: prepare conflict")

// IsPrepareConflict reports whether err is (or wraps) a prepare conflict.
func IsPrepareConflict(err error) bool { return errors.Is(err, ErrPrepareConflict) }

// prepareConflictError is the concrete prepare-conflict error: it matches ErrPrepareConflict and
// carries the channel to wait on.
type prepareConflictError struct {
	ident    string
	resolved <-chan struct{}
}

func (e *prepareConflictError) Error() string {
	return fmt.Sprintf("storage: prepare conflict in %s: the key was written by a prepared transaction", e.ident)
}

func (e *prepareConflictError) Is(target error) bool { return target == ErrPrepareConflict }

// PrepareConflictBehavior says what reads of prepared keys do (MongoDB's
// PrepareConflictBehavior).
type PrepareConflictBehavior int

const (
	// PrepareConflictEnforce: reads at or above a prepare timestamp fail with
	// ErrPrepareConflict (the default).
	PrepareConflictEnforce PrepareConflictBehavior = iota
	// PrepareConflictIgnore: reads return the pre-prepare state; the unit may not write
	// (what it read may be about to change). MongoDB's read concern local/available reads.
	PrepareConflictIgnore
	// PrepareConflictIgnoreAllowWrites: as Ignore, but writes are allowed (the caller knows
	// its writes do not depend on prepared data, e.g. an index build's side table).
	PrepareConflictIgnoreAllowWrites
)

// SetPrepareConflictBehavior chooses how the unit's reads treat prepared keys; ErrSnapshotActive
// if a snapshot is open (the behaviour is part of how the snapshot reads).
func (ru *RecoveryUnit) SetPrepareConflictBehavior(b PrepareConflictBehavior) error {
	if ru.snapOpen && b != ru.prepBehavior {
		return ErrSnapshotActive
	}
	ru.prepBehavior = b
	return nil
}

// PrepareConflictBehavior returns the unit's behaviour.
func (ru *RecoveryUnit) PrepareConflictBehavior() PrepareConflictBehavior { return ru.prepBehavior }

// closedChan is returned to waiters whose conflict is already resolved.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// preparedKey is one key of a prepared (or recently committed prepared) unit.
type preparedKey struct {
	key       string // conflict-table key: ident prefix ‖ user key
	owner     *RecoveryUnit
	prepareTs optime.Timestamp
	commitTs  optime.Timestamp // null while prepared
	commitSeq uint64           // the commit's sequence once committed
}

// preparedSet is immutable once published.
type preparedSet struct {
	keys     []preparedKey // sorted by key (a key may appear twice: committed, then re-prepared)
	resolved chan struct{} // closed by the next resolution
}

// prepareState is the engine's registry of prepared units.
type prepareState struct {
	set atomic.Pointer[preparedSet] // nil: nothing prepared or retained (the hot path)
	mu  sync.Mutex                  // serialises rebuilds
	// resolved is closed and replaced on each resolution; guarded by mu.
	resolved chan struct{}
	// units counts prepared units not yet resolved (serverStatus-style introspection, tests).
	units atomic.Int64
}

// publishLocked installs keys as the new set (nil when empty).
func (p *prepareState) publishLocked(keys []preparedKey) {
	if p.resolved == nil {
		p.resolved = make(chan struct{})
	}
	if len(keys) == 0 {
		p.set.Store(nil)
		return
	}
	p.set.Store(&preparedSet{keys: keys, resolved: p.resolved})
}

// wakeLocked closes the current resolution channel and starts a new one.
func (p *prepareState) wakeLocked() {
	if p.resolved != nil {
		close(p.resolved)
	}
	p.resolved = make(chan struct{})
}

func (p *prepareState) current() []preparedKey {
	if s := p.set.Load(); s != nil {
		return s.keys
	}
	return nil
}

// add publishes ru's owned keys as prepared at ts.
func (p *prepareState) add(ru *RecoveryUnit, ts optime.Timestamp, owned []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.current()
	keys := make([]preparedKey, 0, len(old)+len(owned))
	keys = append(keys, old...)
	for _, k := range owned {
		keys = append(keys, preparedKey{key: k, owner: ru, prepareTs: ts})
	}
	slices.SortStableFunc(keys, func(a, b preparedKey) int { return strings.Compare(a.key, b.key) })
	p.publishLocked(keys)
	p.units.Add(1)
}

// resolve marks ru's entries committed at commitTs with sequence seq (or, when rolled back,
// removes them), drops entries no snapshot can need any more, and wakes waiters.
func (p *prepareState) resolve(ru *RecoveryUnit, committed bool, commitTs optime.Timestamp, seq uint64, minSnap func() uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.current()
	keys := make([]preparedKey, 0, len(old))
	for _, k := range old {
		if k.owner == ru {
			if !committed {
				continue
			}
			k.owner, k.commitTs, k.commitSeq = nil, commitTs, seq
		}
		keys = append(keys, k)
	}
	p.publishLocked(pruneCommitted(keys, minSnap))
	p.wakeLocked()
	p.units.Add(-1)
}

// prune drops committed entries that every open snapshot already contains.
func (p *prepareState) prune(minSnap func() uint64) {
	s := p.set.Load()
	if s == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.current()
	keys := pruneCommitted(slices.Clone(old), minSnap)
	if len(keys) != len(old) {
		p.publishLocked(keys)
	}
}

func pruneCommitted(keys []preparedKey, minSnap func() uint64) []preparedKey {
	hasCommitted := false
	for i := range keys {
		if keys[i].commitSeq != 0 {
			hasCommitted = true
			break
		}
	}
	if !hasCommitted {
		return keys
	}
	min := minSnap()
	return slices.DeleteFunc(keys, func(k preparedKey) bool { return k.commitSeq != 0 && k.commitSeq <= min })
}

// closeAll wakes every waiter (engine Close): prepared units are lost with the process.
func (p *prepareState) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set.Store(nil)
	p.wakeLocked()
}

// conflictFor reports the prepare conflict entry k causes for ru, if any.
func (ru *RecoveryUnit) conflictsWith(k *preparedKey) bool {
	if k.owner == ru {
		return false
	}
	if k.commitSeq == 0 {
		return ru.readTs >= k.prepareTs
	}
	// Committed after this snapshot opened, at a timestamp the snapshot must see.
	return k.commitSeq > ru.snapSeq && ru.readTs >= k.commitTs
}

// checkPreparedPoint returns a prepare conflict if ck (ident prefix ‖ user key) conflicts for
// ru. The snapshot must be open. Callers load s (non-nil) themselves so the hot path is one
// atomic load.
func (ru *RecoveryUnit) checkPreparedPoint(s *preparedSet, ii *identInfo, ck string) error {
	if ru.prepBehavior != PrepareConflictEnforce {
		return nil
	}
	i, _ := slices.BinarySearchFunc(s.keys, ck, func(k preparedKey, t string) int { return strings.Compare(k.key, t) })
	for ; i < len(s.keys) && s.keys[i].key == ck; i++ {
		if ru.conflictsWith(&s.keys[i]) {
			return ru.prepareConflict(s, ii, &s.keys[i])
		}
	}
	return nil
}

// checkPreparedRange returns a prepare conflict if a key in the interval between lo and hi
// (user keys of ii; nil = unbounded; each end inclusive or not) conflicts for ru.
func (ru *RecoveryUnit) checkPreparedRange(s *preparedSet, ii *identInfo, lo []byte, loIncl bool, hi []byte, hiIncl bool) error {
	if ru.prepBehavior != PrepareConflictEnforce {
		return nil
	}
	start := string(appendPrefix(nil, ii.id))
	if lo != nil {
		start += string(lo)
	}
	i, _ := slices.BinarySearchFunc(s.keys, start, func(k preparedKey, t string) int { return strings.Compare(k.key, t) })
	for ; i < len(s.keys); i++ {
		k := &s.keys[i]
		if len(k.key) < prefixLen || k.key[:prefixLen] != start[:prefixLen] {
			break // past the ident
		}
		uk := k.key[prefixLen:]
		if lo != nil && !loIncl && uk == string(lo) {
			continue
		}
		if hi != nil {
			if c := strings.Compare(uk, string(hi)); c > 0 || (c == 0 && !hiIncl) {
				break
			}
		}
		if ru.conflictsWith(k) {
			return ru.prepareConflict(s, ii, k)
		}
	}
	return nil
}

func (ru *RecoveryUnit) prepareConflict(s *preparedSet, ii *identInfo, k *preparedKey) error {
	ch := s.resolved
	if k.commitSeq != 0 {
		ch = closedChan // already resolved: retry with a new snapshot at once
	}
	return &prepareConflictError{ident: ii.name, resolved: ch}
}

// ---- the prepared unit ----

// Prepare marks the open unit of work prepared at ts (the prepare oplog entry's timestamp,
// a freshly reserved slot above every read timestamp in use). From now on the unit may not
// write or set timestamps other than its commit's; its keys stay owned (writers get
// WriteConflict) and readers at or above ts get prepare conflicts until it resolves: by
// CommitPrepared (or SetCommitTimestamp and Commit) at a commit timestamp ≥ ts, or by End
// without commit (rollback). Writes made with SetTimestamp or after SetCommitTimestamp cannot
// be prepared (a prepared transaction's writes take the commit timestamp).
func (ru *RecoveryUnit) Prepare(ts optime.Timestamp) error {
	switch {
	case ru.depth == 0:
		return ErrNotInUnit
	case !ru.prepareTs.IsNull():
		return fmt.Errorf("storage: unit already prepared at %v", ru.prepareTs)
	case ru.doomed:
		return errors.New("storage: cannot prepare a unit of work rolled back by a nested unit")
	case ts.IsNull():
		return errors.New("storage: null prepare timestamp")
	case !ru.commitTs.IsNull() || !ru.curTs.IsNull():
		return errors.New("storage: cannot prepare a unit with timestamped writes")
	case ru.e.closed.Load():
		return ErrClosed
	}
	if oldest := ru.e.OldestTimestamp(); ts < oldest {
		return fmt.Errorf("storage: prepare timestamp %v is older than the oldest timestamp %v", ts, oldest)
	}
	e := ru.e
	e.ts.mu.Lock()
	e.observeLocked(ts) // later engine-assigned timestamps are above it
	e.ts.mu.Unlock()
	ru.prepareTs = ts
	e.prep.add(ru, ts, ru.owned)
	// The unit will not write again, so its snapshot has done its work (the write-conflict
	// checks); a prepared transaction may wait long, and an open view pins Pebble's memtables
	// and sstables and the conflict table's history. Its own reads open a new one.
	ru.releaseSnapshot()
	return nil
}

// PrepareTimestamp returns the prepare timestamp, null if the unit is not prepared.
func (ru *RecoveryUnit) PrepareTimestamp() optime.Timestamp { return ru.prepareTs }

// IsPrepared reports whether the unit is prepared (and not yet resolved).
func (ru *RecoveryUnit) IsPrepared() bool { return !ru.prepareTs.IsNull() }

// SetDurableTimestamp sets a prepared unit's durable timestamp: the timestamp of its
// commitTransaction oplog entry, ≥ the commit timestamp (SetCommitTimestamp first). It is in
// flight (the all-durable point stays below it) until the unit resolves; the caller keeps its
// own oplog slot reservation until the entry is written.
func (ru *RecoveryUnit) SetDurableTimestamp(ts optime.Timestamp) error {
	switch {
	case ru.prepareTs.IsNull():
		return errors.New("storage: durable timestamp on a unit that is not prepared")
	case ru.commitTs.IsNull():
		return errors.New("storage: durable timestamp before the commit timestamp")
	case ts < ru.commitTs:
		return fmt.Errorf("storage: durable timestamp %v is older than the commit timestamp %v", ts, ru.commitTs)
	case !ru.durableTs.IsNull():
		if ru.durableTs != ts {
			return fmt.Errorf("storage: durable timestamp already set to %v", ru.durableTs)
		}
		return nil
	}
	ru.durableTs = ts
	ru.e.registerInflight(ts)
	ru.inflight = append(ru.inflight, ts)
	return nil
}

// setPreparedCommitTimestamp is SetCommitTimestamp for a prepared unit: ts ≥ prepare, observed
// but not in flight (see the design note).
func (ru *RecoveryUnit) setPreparedCommitTimestamp(ts optime.Timestamp) error {
	if ts < ru.prepareTs {
		return fmt.Errorf("storage: commit timestamp %v is older than the prepare timestamp %v", ts, ru.prepareTs)
	}
	e := ru.e
	e.ts.mu.Lock()
	e.observeLocked(ts)
	e.ts.mu.Unlock()
	ru.commitTs = ts
	return nil
}

// noteCommitted raises the largest committed timestamp (the all-durable point when nothing is
// in flight) to ts without touching the in-flight set, where ts may legitimately be held by
// someone else (a caller's oplog slot equal to the commit timestamp).
func (e *Engine) noteCommitted(ts optime.Timestamp) {
	e.ts.mu.Lock()
	defer e.ts.mu.Unlock()
	if ts > e.ts.maxCommitted {
		e.ts.maxCommitted = ts
	}
}

// CommitPrepared commits a prepared unit (this must be its outermost WriteUnitOfWork) at
// commitTs (≥ the prepare timestamp): every write becomes visible at exactly commitTs.
// durableTs (the commit oplog entry's timestamp, ≥ commitTs; null = commitTs) is in flight
// until the commit is applied. On error the unit stays prepared unless the error says it was
// rolled back (a dropped ident, a closed engine), as Commit.
func (w *WriteUnitOfWork) CommitPrepared(commitTs, durableTs optime.Timestamp) error {
	ru := w.ru
	if ru.prepareTs.IsNull() {
		return errors.New("storage: CommitPrepared on a unit that is not prepared")
	}
	if !w.outermost {
		return errors.New("storage: CommitPrepared on a nested unit of work")
	}
	if err := ru.SetCommitTimestamp(commitTs); err != nil {
		return err
	}
	if !durableTs.IsNull() && durableTs != commitTs {
		if err := ru.SetDurableTimestamp(durableTs); err != nil {
			return err
		}
	}
	return w.Commit()
}

// RefreshSnapshot replaces the unit's Pebble view by a new one at the same read timestamp,
// inside a unit of work too: what a reader at a fixed timestamp needs after waiting out a
// prepare conflict, since the only commits at or below its timestamp that a newer view can
// add are prepared commits "in the past" (the all-durable point bounds every other). A
// multi-document transaction reading at a timestamp (snapshot, majority) thus waits and
// continues, as with WiredTiger, instead of aborting. Refused for ReadNoTimestamp units (a
// newer view is a different snapshot) and for units with writes that are not isolated
// (SetIsolatedWrites; the write-conflict check would otherwise forget what the old view did
// not show). The unit's cursors must be saved before and restored after.
func (ru *RecoveryUnit) RefreshSnapshot() error {
	if !ru.snapOpen {
		return nil
	}
	if ru.readTs == optime.MaxTimestamp {
		return errors.New("storage: RefreshSnapshot on a unit reading without a timestamp")
	}
	if len(ru.ops) > 0 && !ru.isolatedWrites {
		return errors.New("storage: RefreshSnapshot on a unit with writes that are not isolated")
	}
	for _, c := range ru.cursors {
		if c.it != nil {
			return errors.New("storage: RefreshSnapshot with an unsaved cursor")
		}
	}
	e := ru.e
	if e.closed.Load() {
		return ErrClosed
	}
	seq := e.snaps.register()
	it, err := e.db.NewIter(nil)
	if err != nil {
		e.snaps.unregister(seq)
		return err
	}
	_ = ru.iter.Close()
	e.snaps.unregister(ru.snapSeq)
	ru.iter, ru.snapSeq = it, seq
	return nil
}

// PreparedUnits returns the number of prepared units not yet resolved.
func (e *Engine) PreparedUnits() int64 { return e.prep.units.Load() }

// PrepareConflictRetry runs f until it returns something other than a prepare conflict. After
// a conflict it waits until the conflicting prepared unit (or some other) commits or rolls
// back, or until ctx is done (then it returns context.Cause(ctx)). It abandons nothing
// itself: like WriteConflictRetry's, f must start from a fresh snapshot each time, or it would
// meet the same stale view again; f should end a failed attempt by rolling back its
// WriteUnitOfWork and calling AbandonSnapshot (or closing its RecoveryUnit), so no view stays
// pinned while it waits (an open view also keeps Engine.Close from closing Pebble cleanly). Nest it inside WriteConflictRetry for operations that write.
func (e *Engine) PrepareConflictRetry(ctx context.Context, f func() error) error {
	backoff := retryBackoffStart
	var timer *time.Timer
	for {
		err := f()
		var pc *prepareConflictError
		if !errors.As(err, &pc) {
			return err
		}
		if e.closed.Load() {
			return ErrClosed
		}
		wait := pc.resolved
		if wait == closedChan {
			// Already resolved: the retry with a new view succeeds at once, unless f keeps
			// its stale view (a caller bug), which must not become a busy loop.
			if timer == nil {
				timer = time.NewTimer(0)
				defer timer.Stop()
				<-timer.C
				continue
			}
			timer.Reset(backoff)
			backoff = min(backoff*2, retryBackoffMax)
			wait = nil
		}
		var tick <-chan time.Time
		if timer != nil && wait == nil {
			tick = timer.C
		}
		select {
		case <-wait:
		case <-tick:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// ---- prepared commits below the stable timestamp (durable timestamp records) ----
//
// A prepared unit may commit at a timestamp at or below the stable timestamp (the prepare
// timestamp does not hold the all-durable point, so stable can pass it while the unit is
// prepared), while its commitTransaction oplog entry, at the durable timestamp, is above
// stable. If that entry is then rolled back (replication rollback, or a crash before it was
// majority committed), RecoverToStable must undo the commit too, or the data would say
// committed while the oplog says prepared, and a later abortTransaction would leave the
// commit's versions behind. Versions carry one timestamp (the commit's), so the commit batch
// also writes a record (metadata, untimestamped) keyed by the durable timestamp and listing
// the versions it wrote; WiredTiger keeps the durable timestamp on each update for the same
// purpose. RecoverToStable deletes the listed versions of every record whose durable
// timestamp is above stable, then all records; records whose durable timestamp stable has
// reached are deleted in the background. While a record is outstanding, history GC keeps the
// versions below its commit timestamp (its horizon is min(oldest, commit − 1)), so undoing
// the commit uncovers the previous version rather than nothing.

const metaPreparedCommitTag = "pcommit/" // + durable ts (8) ‖ random (8) -> commit ts (8) ‖ (ident id (4) ‖ uvarint len ‖ key)*

// preparedCommitRecord is an outstanding record (in memory; loaded at Open).
type preparedCommitRecord struct {
	metaKey   []byte
	durableTs optime.Timestamp
	commitTs  optime.Timestamp
}

type preparedCommits struct {
	mu      sync.Mutex
	records []preparedCommitRecord
}

// encodePreparedCommit returns the record's metadata key and value for a commit at commitTs
// of the ops (timestamped, non-oplog idents only); ok is false when there is nothing to record.
func encodePreparedCommit(durableTs, commitTs optime.Timestamp, ops []pendingOp) (key, val []byte, ok bool) {
	val = binary.BigEndian.AppendUint64(nil, uint64(commitTs))
	n := 0
	for i := range ops {
		op := &ops[i]
		if op.ii.untimestamped() || op.ii.isOplog() {
			continue
		}
		val = binary.BigEndian.AppendUint32(val, op.ii.id)
		val = binary.AppendUvarint(val, uint64(len(op.key)))
		val = append(val, op.key...)
		n++
	}
	if n == 0 {
		return nil, nil, false
	}
	name := make([]byte, 0, len(metaPreparedCommitTag)+16)
	name = append(name, metaPreparedCommitTag...)
	name = binary.BigEndian.AppendUint64(name, uint64(durableTs))
	name = binary.BigEndian.AppendUint64(name, rand.Uint64()) // two commits may share a durable ts
	return metaKey(string(name)), val, true
}

// decodePreparedCommit calls f for each (ident id, user key) of a record value.
func decodePreparedCommit(val []byte, f func(id uint32, key []byte)) (optime.Timestamp, error) {
	if len(val) < 8 {
		return 0, fmt.Errorf("%w: prepared commit record of %d bytes", ErrCorrupt, len(val))
	}
	commitTs := optime.Timestamp(binary.BigEndian.Uint64(val))
	for rest := val[8:]; len(rest) > 0; {
		if len(rest) < 5 {
			return 0, fmt.Errorf("%w: truncated prepared commit record", ErrCorrupt)
		}
		id := binary.BigEndian.Uint32(rest)
		n, w := binary.Uvarint(rest[4:])
		if w <= 0 || uint64(len(rest)-4-w) < n {
			return 0, fmt.Errorf("%w: truncated prepared commit record", ErrCorrupt)
		}
		if f != nil {
			f(id, rest[4+w:4+w+int(n)])
		}
		rest = rest[4+w+int(n):]
	}
	return commitTs, nil
}

// add registers an outstanding record; called before its batch is applied, so no GC
// pass between the apply and the registration can drop the history it protects.
func (p *preparedCommits) add(r preparedCommitRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records = append(p.records, r)
}

func (p *preparedCommits) remove(metaKey []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records = slices.DeleteFunc(p.records, func(r preparedCommitRecord) bool { return string(r.metaKey) == string(metaKey) })
}

// gcHorizon is the timestamp history GC collects below: the oldest timestamp, lowered below
// the commit timestamp of every outstanding prepared-commit record.
func (e *Engine) gcHorizon() optime.Timestamp {
	h := e.OldestTimestamp()
	e.pcommits.mu.Lock()
	for _, r := range e.pcommits.records {
		if r.commitTs-1 < h {
			h = r.commitTs - 1
		}
	}
	e.pcommits.mu.Unlock()
	return h
}

// loadPreparedCommits reads the outstanding records at Open.
func (e *Engine) loadPreparedCommits() error {
	return e.scanMeta(metaPreparedCommitTag, func(name string, val []byte) error {
		if len(name) != 16 {
			return fmt.Errorf("%w: prepared commit record name of %d bytes", ErrCorrupt, len(name))
		}
		commitTs, err := decodePreparedCommit(val, nil)
		if err != nil {
			return err
		}
		e.pcommits.records = append(e.pcommits.records, preparedCommitRecord{
			metaKey:   metaKey(metaPreparedCommitTag + name),
			durableTs: optime.Timestamp(binary.BigEndian.Uint64([]byte(name[:8]))),
			commitTs:  commitTs,
		})
		return nil
	})
}

// settlePreparedCommits deletes the records whose durable timestamp stable has reached: their
// commits can no longer be rolled back.
func (e *Engine) settlePreparedCommits() {
	stable := e.StableTimestamp()
	e.pcommits.mu.Lock()
	var done [][]byte
	for _, r := range e.pcommits.records {
		if r.durableTs <= stable {
			done = append(done, r.metaKey)
		}
	}
	e.pcommits.mu.Unlock()
	for _, k := range done {
		if err := e.db.Delete(k, pebble.NoSync); err != nil {
			e.logger.Error("deleting a prepared commit record failed", "err", err)
			return
		}
		e.journal.dirty.Store(true)
		e.pcommits.remove(k)
	}
}

// undoPreparedCommitsAfter (RecoverToStable) deletes the versions written by prepared commits
// whose durable timestamp is above stable, then every record. It returns the idents touched.
func (e *Engine) undoPreparedCommitsAfter(stable optime.Timestamp) (map[uint32]bool, error) {
	e.pcommits.mu.Lock()
	records := slices.Clone(e.pcommits.records)
	e.pcommits.mu.Unlock()
	if len(records) == 0 {
		return nil, nil
	}
	byID := make(map[uint32]*identInfo)
	for _, ii := range *e.idents.Load() {
		byID[ii.id] = ii
	}
	touched := make(map[uint32]bool)
	b := e.db.NewBatch()
	defer func() { _ = b.Close() }()
	for _, r := range records {
		if r.durableTs > stable {
			v, found, err := e.getMeta(r.metaKey)
			if err != nil {
				return nil, err
			}
			if found {
				var kb []byte
				if _, err := decodePreparedCommit(v, func(id uint32, key []byte) {
					if ii := byID[id]; ii != nil && !ii.untimestamped() && !ii.dropped.Load() {
						kb = appendVersionedKey(kb[:0], id, key, r.commitTs)
						_ = b.Delete(kb, nil)
						touched[id] = true
					}
				}); err != nil {
					return nil, err
				}
			}
		}
		_ = b.Delete(r.metaKey, nil)
	}
	if err := e.db.Apply(b, pebble.NoSync); err != nil {
		return nil, err
	}
	e.pcommits.mu.Lock()
	e.pcommits.records = nil
	e.pcommits.mu.Unlock()
	return touched, nil
}
