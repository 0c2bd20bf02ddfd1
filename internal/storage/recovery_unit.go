package storage

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// RecoveryUnit is one operation's storage transaction: a lazily opened snapshot plus a buffer
// of uncommitted writes. Not safe for concurrent use.
type RecoveryUnit struct {
	e *Engine

	src      ReadSource
	provided optime.Timestamp

	// Snapshot state, valid while snapOpen.
	snapOpen bool
	iter     *pebble.Iterator // root view; point reads seek it, cursors clone it
	snapSeq  uint64           // commit sequence when the snapshot opened (write conflicts)
	readTs   optime.Timestamp // newest version timestamp visible
	oplogVis optime.Timestamp // oplog visibility point captured at open (ReadNoTimestamp)
	seekBuf  []byte

	// Unit-of-work state.
	depth      int
	doomed     bool
	bufs       map[uint32]*identBuf
	ops        []pendingOp
	owned      []string // conflict-table keys owned by this unit
	counts     map[*identInfo]*[2]int64
	commitTs   optime.Timestamp
	curTs      optime.Timestamp
	inflight   []optime.Timestamp // explicit timestamps registered in flight
	onCommit   []func(optime.Timestamp)
	onRollback []func()

	// cursors are the unit's cursors not closed yet; Close closes them, so a caller that
	// forgets one cannot leave a Pebble iterator open under a closing engine.
	cursors []*Cursor

	// observerState is the op observer's replication context of this unit (unreplicated
	// writes, the session of a retryable write): opobserver owns its type, the unit only
	// carries it so that it lives and dies with the operation.
	observerState any

	// isolatedWrites: a write also conflicts with a version committed before the snapshot
	// opened but above its read timestamp (SetIsolatedWrites).
	isolatedWrites bool

	// Prepared state (prepare.go): the prepare timestamp (null unless prepared), the durable
	// timestamp of its commit, and how this unit's reads treat other units' prepared keys.
	prepareTs    optime.Timestamp
	durableTs    optime.Timestamp
	prepBehavior PrepareConflictBehavior

	closed bool
}

// identBuf holds a unit's uncommitted writes to one ident: the latest write per key, in a map
// for point reads and in an ordered tree (the same entries) for cursors.
type identBuf struct {
	ii   *identInfo
	m    map[string]*bufEntry
	tree keyTree
}

type bufEntry struct {
	val  []byte // header ‖ payload; the payload is val[1:]
	tomb bool
}

// pendingOp is one write in commit order. ts is 0 when the commit timestamp applies.
type pendingOp struct {
	ii  *identInfo
	key string
	ts  optime.Timestamp
	val []byte // header ‖ payload
}

// NewRecoveryUnit returns a unit reading with ReadNoTimestamp.
func (e *Engine) NewRecoveryUnit() *RecoveryUnit {
	return &RecoveryUnit{e: e}
}

// SetReadSource chooses the snapshot; ErrSnapshotActive if one is open.
func (ru *RecoveryUnit) SetReadSource(src ReadSource, ts optime.Timestamp) error {
	if ru.snapOpen {
		return ErrSnapshotActive
	}
	ru.src, ru.provided = src, ts
	return nil
}

// ReadSource returns the read source and its timestamp (the all-durable point captured at
// snapshot open for ReadAllDurable).
func (ru *RecoveryUnit) ReadSource() (ReadSource, optime.Timestamp) {
	switch ru.src {
	case ReadProvided:
		return ru.src, ru.provided
	case ReadAllDurable:
		if ru.snapOpen {
			return ru.src, ru.readTs
		}
	}
	return ru.src, 0
}

// SetIsolatedWrites makes the unit's writes snapshot-isolated against its read timestamp: a
// write to a key whose newest committed version is newer than the timestamp the unit reads
// at fails with WriteConflict, even when that version was committed before the snapshot
// opened (the commit-sequence check alone cannot see it: the view holds the version, the read
// timestamp hides it). A multi-document transaction reading at a timestamp (read concern
// snapshot or majority) needs this, or it would overwrite a version it never saw (a lost
// update). Units reading the newest data need no extra check and pay nothing.
func (ru *RecoveryUnit) SetIsolatedWrites(on bool) { ru.isolatedWrites = on }

// newerThanSnapshot reports whether key's newest version in the view is above the read
// timestamp.
func (ru *RecoveryUnit) newerThanSnapshot(ii *identInfo, key []byte) (bool, error) {
	ru.seekBuf = appendVersionedKey(ru.seekBuf[:0], ii.id, key, optime.MaxTimestamp)
	if !ru.iter.SeekPrefixGE(ru.seekBuf) {
		return false, ru.iter.Error()
	}
	k := ru.iter.Key()
	p := splitKey(k)
	if p == len(k) || !bytes.Equal(k[:p], ru.seekBuf[:len(ru.seekBuf)-versionSuffixLen]) {
		return false, nil
	}
	return versionTs(k, p) > ru.readTs, nil
}

// PreallocateSnapshot opens the snapshot now.
func (ru *RecoveryUnit) PreallocateSnapshot() error { return ru.ensureSnapshot() }

func (ru *RecoveryUnit) ensureSnapshot() error {
	if ru.snapOpen {
		return nil
	}
	if ru.closed {
		return errors.New("storage: recovery unit is closed")
	}
	e := ru.e
	if e.closed.Load() {
		return ErrClosed
	}
	// Timestamps are fixed before the Pebble view is created: every commit at or below them
	// has finished applying, so the view contains it (no holes).
	switch ru.src {
	case ReadNoTimestamp:
		ru.readTs = optime.MaxTimestamp
		ru.oplogVis = e.OplogVisibleTimestamp()
	case ReadProvided:
		if ru.provided < e.OldestTimestamp() {
			return mongoerr.Newf(mongoerr.SnapshotTooOld,
				"read timestamp %v is older than the oldest available timestamp %v", ru.provided, e.OldestTimestamp())
		}
		ru.readTs = ru.provided
	case ReadAllDurable:
		ru.readTs = e.AllDurableTimestamp()
	default:
		return fmt.Errorf("storage: unknown read source %d", ru.src)
	}
	ru.snapSeq = e.snaps.register()
	it, err := e.db.NewIter(nil)
	if err != nil {
		e.snaps.unregister(ru.snapSeq)
		return err
	}
	ru.iter = it
	ru.snapOpen = true
	return nil
}

// AbandonSnapshot releases the snapshot; the next access opens a new one. Ignored inside a
// WriteUnitOfWork (the unit's writes were checked against its snapshot).
func (ru *RecoveryUnit) AbandonSnapshot() {
	if ru.depth > 0 {
		return
	}
	ru.releaseSnapshot()
}

func (ru *RecoveryUnit) releaseSnapshot() {
	if !ru.snapOpen {
		return
	}
	_ = ru.iter.Close()
	ru.iter = nil
	ru.e.snaps.unregister(ru.snapSeq)
	ru.snapOpen = false
}

// Close abandons everything (rolling back an open unit, which is a caller bug).
func (ru *RecoveryUnit) Close() {
	if ru.closed {
		return
	}
	if ru.depth > 0 {
		ru.rollback()
		ru.depth = 0
	}
	ru.e.finishInflight(ru.inflight, false)
	ru.inflight = nil
	for len(ru.cursors) > 0 {
		ru.cursors[len(ru.cursors)-1].Close()
	}
	ru.releaseSnapshot()
	ru.closed = true
}

// WriteUnitOfWork groups writes committed atomically. Nested units join the outermost.
type WriteUnitOfWork struct {
	ru        *RecoveryUnit
	outermost bool
	committed bool
	ended     bool
}

// BeginUnitOfWork starts (or joins) a unit of work.
func (ru *RecoveryUnit) BeginUnitOfWork() *WriteUnitOfWork {
	ru.depth++
	return &WriteUnitOfWork{ru: ru, outermost: ru.depth == 1}
}

// InUnitOfWork reports whether a unit of work is open.
func (ru *RecoveryUnit) InUnitOfWork() bool { return ru.depth > 0 }

// Commit commits the unit (only the outermost commit does work).
func (w *WriteUnitOfWork) Commit() error {
	if w.ended || w.committed {
		return errors.New("storage: WriteUnitOfWork already committed or ended")
	}
	ru := w.ru
	if ru.doomed {
		return errors.New("storage: unit of work was rolled back by a nested unit")
	}
	if !w.outermost {
		w.committed = true
		return nil
	}
	if err := ru.commit(); err != nil {
		return err
	}
	w.committed = true
	return nil
}

// End closes the unit; without Commit it rolls back (a nested End dooms the outer unit).
func (w *WriteUnitOfWork) End() {
	if w.ended {
		return
	}
	w.ended = true
	ru := w.ru
	ru.depth--
	if !w.outermost {
		if !w.committed {
			ru.doomed = true
		}
		return
	}
	if !w.committed {
		ru.rollback()
	}
	ru.doomed = false
}

// SetCommitTimestamp sets the timestamp of every write in the unit and marks it in flight.
func (ru *RecoveryUnit) SetCommitTimestamp(ts optime.Timestamp) error {
	if ts.IsNull() {
		return errors.New("storage: null commit timestamp")
	}
	if !ru.commitTs.IsNull() && ru.commitTs != ts {
		return fmt.Errorf("storage: commit timestamp already set to %v", ru.commitTs)
	}
	if ru.commitTs == ts {
		return nil
	}
	if !ru.prepareTs.IsNull() {
		return ru.setPreparedCommitTimestamp(ts)
	}
	ru.commitTs = ts
	ru.e.registerInflight(ts)
	ru.inflight = append(ru.inflight, ts)
	return nil
}

// SetTimestamp sets the timestamp of the writes that follow and marks it in flight.
func (ru *RecoveryUnit) SetTimestamp(ts optime.Timestamp) error {
	if ts.IsNull() {
		return errors.New("storage: null timestamp")
	}
	if !ru.commitTs.IsNull() {
		return errors.New("storage: SetTimestamp after SetCommitTimestamp")
	}
	if !ru.prepareTs.IsNull() {
		return errors.New("storage: SetTimestamp on a prepared unit")
	}
	ru.curTs = ts
	ru.e.registerInflight(ts)
	ru.inflight = append(ru.inflight, ts)
	return nil
}

// OnCommit registers f to run after commit, in registration order.
func (ru *RecoveryUnit) OnCommit(f func(commitTs optime.Timestamp)) {
	ru.onCommit = append(ru.onCommit, f)
}

// OnRollback registers f to run on rollback, in reverse registration order.
func (ru *RecoveryUnit) OnRollback(f func()) { ru.onRollback = append(ru.onRollback, f) }

// ---- reads and writes ----

// Get returns a copy of the newest visible value of key, seeing the unit's own writes.
func (ru *RecoveryUnit) Get(ident string, key []byte) ([]byte, bool, error) {
	ii, err := ru.e.lookupIdent(ident)
	if err != nil {
		return nil, false, err
	}
	if b := ru.bufs[ii.id]; b != nil {
		if be, ok := b.m[string(key)]; ok {
			if be.tomb {
				return nil, false, nil
			}
			return slices.Clone(be.val[1:]), true, nil
		}
	}
	payload, found, err := ru.snapshotGet(ii, key)
	if err != nil {
		return nil, false, err
	}
	// Prepared keys (prepare.go): one atomic load when nothing is prepared.
	if s := ru.e.prep.set.Load(); s != nil {
		ck := string(appendPrefix(make([]byte, 0, prefixLen+len(key)), ii.id)) + string(key)
		if err := ru.checkPreparedPoint(s, ii, ck); err != nil {
			return nil, false, err
		}
	}
	if !found {
		return nil, false, nil
	}
	return slices.Clone(payload), true, nil
}

// snapshotGet reads key in the snapshot; payload aliases the iterator until its next move.
func (ru *RecoveryUnit) snapshotGet(ii *identInfo, key []byte) ([]byte, bool, error) {
	if err := ru.ensureSnapshot(); err != nil {
		return nil, false, err
	}
	ru.seekBuf = appendVersionedKey(ru.seekBuf[:0], ii.id, key, ru.readTs)
	// Versions sort newest first, so the first key >= (key, readTs) with the same prefix is
	// the newest version at or below readTs. SeekPrefixGE lets bloom filters skip tables.
	if !ru.iter.SeekPrefixGE(ru.seekBuf) {
		return nil, false, ru.iter.Error()
	}
	k := ru.iter.Key()
	p := splitKey(k)
	if p == len(k) || !bytes.Equal(k[:p], ru.seekBuf[:len(ru.seekBuf)-versionSuffixLen]) {
		return nil, false, fmt.Errorf("%w: unexpected key %s for %s", ErrCorrupt, keyFormatter(k), ii.name)
	}
	v, err := ru.iter.ValueAndErr()
	if err != nil {
		return nil, false, err
	}
	payload, tomb, err := decodeValue(v)
	if err != nil || tomb {
		return nil, false, err
	}
	return payload, true, nil
}

// Put writes key=value in the unit.
func (ru *RecoveryUnit) Put(ident string, key, value []byte) error {
	v := make([]byte, 1+len(value))
	v[0] = valueHeaderPut
	copy(v[1:], value)
	return ru.write(ident, key, v, false)
}

// Delete deletes key in the unit (a tombstone version at commit).
func (ru *RecoveryUnit) Delete(ident string, key []byte) error {
	return ru.write(ident, key, []byte{valueHeaderTombstone}, true)
}

func (ru *RecoveryUnit) write(ident string, key, val []byte, tomb bool) error {
	if ru.depth == 0 {
		return ErrNotInUnit
	}
	if !ru.prepareTs.IsNull() {
		return errors.New("storage: write to a prepared unit")
	}
	if ru.prepBehavior == PrepareConflictIgnore {
		return errors.New("storage: write in a unit that ignores prepare conflicts")
	}
	ii, err := ru.e.lookupIdent(ident)
	if err != nil {
		return err
	}
	if err := ru.ensureSnapshot(); err != nil {
		return err
	}
	ck := make([]byte, 0, prefixLen+len(key))
	ck = appendPrefix(ck, ii.id)
	ck = append(ck, key...)
	cks := string(ck)
	if ru.isolatedWrites && ru.readTs != optime.MaxTimestamp {
		if b := ru.bufs[ii.id]; b == nil || b.m[cks[prefixLen:]] == nil {
			newer, err := ru.newerThanSnapshot(ii, key)
			if err != nil {
				return err
			}
			if newer {
				return mongoerr.NewWriteConflict()
			}
		}
	}
	newly, conflict := ru.e.conflicts.acquire(ru, cks, ru.snapSeq)
	if conflict {
		return mongoerr.NewWriteConflict()
	}
	if newly {
		ru.owned = append(ru.owned, cks)
	}
	if ru.bufs == nil {
		ru.bufs = make(map[uint32]*identBuf)
	}
	b := ru.bufs[ii.id]
	if b == nil {
		b = &identBuf{ii: ii, m: make(map[string]*bufEntry)}
		ru.bufs[ii.id] = b
	}
	sk := cks[prefixLen:]
	if be, ok := b.m[sk]; ok {
		be.val, be.tomb = val, tomb
	} else {
		be := &bufEntry{val: val, tomb: tomb}
		b.m[sk] = be
		b.tree.insert(sk, be)
	}
	ru.ops = append(ru.ops, pendingOp{ii: ii, key: sk, ts: ru.curTs, val: val})
	return nil
}

// AdjustCounts records a fast-count delta applied at commit (immediately outside a unit).
func (ru *RecoveryUnit) AdjustCounts(ident string, records, dataSize int64) {
	ii, err := ru.e.lookupIdent(ident)
	if err != nil {
		return
	}
	if ru.depth == 0 {
		ii.records.Add(records)
		ii.dataSize.Add(dataSize)
		ii.countsDirty.Store(true)
		return
	}
	if ru.counts == nil {
		ru.counts = make(map[*identInfo]*[2]int64)
	}
	c := ru.counts[ii]
	if c == nil {
		c = new([2]int64)
		ru.counts[ii] = c
	}
	c[0] += records
	c[1] += dataSize
}

// ---- commit and rollback ----

func (ru *RecoveryUnit) commit() error {
	e := ru.e
	if e.closed.Load() {
		ru.rollback()
		return ErrClosed
	}
	ts := ru.commitTs
	if !ru.prepareTs.IsNull() && ts.IsNull() {
		// The unit stays prepared: only its decision (a commit timestamp or a rollback) ends it.
		return errors.New("storage: commit of a prepared unit without a commit timestamp")
	}
	var auto optime.Timestamp
	if ts.IsNull() {
		ts = ru.curTs
		if ts.IsNull() {
			auto = e.assignCommitTimestamp()
			ts = auto
		}
	}
	used := ru.inflight
	if !auto.IsNull() {
		used = append(used, auto)
	}

	if len(ru.ops) > 0 {
		// Under the read side of dropMu, an ident that is not marked dropped now cannot have
		// its range deleted before this batch is applied.
		e.dropMu.RLock()
		for _, ib := range ru.bufs {
			if ib.ii.dropped.Load() {
				e.dropMu.RUnlock()
				ru.rollback()
				if !auto.IsNull() {
					e.finishInflight([]optime.Timestamp{auto}, false)
				}
				// WiredTiger refuses to drop a table with uncommitted updates (EBUSY) and
				// MongoDB's drop-pending reaper retries; here the drop wins and the writer
				// retries, re-reading the catalog, which no longer has the table.
				return mongoerr.Newf(mongoerr.WriteConflict,
					"WriteConflict error: table %s was dropped while this operation was writing to it", ib.ii.name)
			}
		}
		b := e.db.NewBatch()
		var kb []byte
		for i := range ru.ops {
			op := &ru.ops[i]
			ots := op.ts
			if ots.IsNull() || !ru.commitTs.IsNull() {
				ots = ts
				op.ts = ts
			}
			kb = appendVersionedKey(kb[:0], op.ii.id, []byte(op.key), ots)
			_ = b.Set(kb, op.val, nil)
		}
		var pcKey []byte
		if !ru.prepareTs.IsNull() && ru.durableTs > ts {
			// A prepared commit whose commit oplog entry is later than its data (prepare.go).
			if k, v, ok := encodePreparedCommit(ru.durableTs, ts, ru.ops); ok {
				pcKey = k
				_ = b.Set(k, v, nil)
				e.pcommits.add(preparedCommitRecord{metaKey: k, durableTs: ru.durableTs, commitTs: ts})
			}
		}
		err := e.db.Apply(b, pebble.NoSync)
		e.dropMu.RUnlock()
		_ = b.Close()
		if err != nil {
			if pcKey != nil {
				e.pcommits.remove(pcKey)
			}
			ru.rollback()
			if !auto.IsNull() {
				e.finishInflight([]optime.Timestamp{auto}, false)
			}
			return fmt.Errorf("storage: commit: %w", err)
		}
		e.noteGCWrites(ru.ops) // history GC visits these keys once oldest passes them
	}
	for ii, c := range ru.counts {
		ii.records.Add(c[0])
		ii.dataSize.Add(c[1])
		ii.countsDirty.Store(true)
	}
	for i := range ru.ops {
		op := &ru.ops[i]
		if op.ii.oplog != nil && op.val[0] == valueHeaderPut {
			e.noteOplogWrite(op.ii, len(op.key)+len(op.val), op.ts)
		}
	}
	e.finishInflight(used, true)
	if !ru.prepareTs.IsNull() {
		e.noteCommitted(ts) // a prepared commit timestamp was never in flight
	}
	e.journal.dirty.Store(true)
	seq := e.snaps.nextCommitSeq()
	if !ru.prepareTs.IsNull() {
		// After the batch and its sequence: a reader whose snapshot lacks the commit either
		// still sees the key prepared or sees it committed after its snapshot (prepare.go).
		e.prep.resolve(ru, true, ts, seq, e.snaps.minOpen)
	}
	e.conflicts.release(ru, ru.owned, seq, e.snaps.minOpen)

	// The hook timestamp is the commit timestamp, or the last SetTimestamp for vectored
	// writes, or the engine-assigned one.
	hooks := ru.onCommit
	ru.inflight = nil
	ru.resetUnit()
	ru.releaseSnapshot()
	for _, f := range hooks {
		f(ts)
	}
	return nil
}

// rollback discards the unit's writes and runs rollback hooks in reverse order.
func (ru *RecoveryUnit) rollback() {
	e := ru.e
	if !ru.prepareTs.IsNull() {
		e.prep.resolve(ru, false, 0, 0, e.snaps.minOpen)
	}
	e.conflicts.release(ru, ru.owned, 0, e.snaps.minOpen)
	e.finishInflight(ru.inflight, false)
	ru.inflight = nil
	hooks := ru.onRollback
	ru.resetUnit()
	ru.releaseSnapshot()
	for i := len(hooks) - 1; i >= 0; i-- {
		hooks[i]()
	}
}

func (ru *RecoveryUnit) resetUnit() {
	ru.bufs = nil
	ru.ops = nil
	ru.owned = nil
	ru.counts = nil
	ru.commitTs = 0
	ru.curTs = 0
	ru.prepareTs = 0
	ru.durableTs = 0
	ru.onCommit = nil
	ru.onRollback = nil
}

// ObserverState returns what SetObserverState stored on ru (nil if nothing).
func (ru *RecoveryUnit) ObserverState() any { return ru.observerState }

// SetObserverState stores the op observer's per-unit state on ru (opobserver only). Like the
// rest of the unit, it is used by the unit's goroutine only.
func (ru *RecoveryUnit) SetObserverState(v any) { ru.observerState = v }
