package storage

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"humongo/internal/optime"
	"humongo/internal/recordid"
)

// Cursor iterates the newest visible version of each live key of an ident, merged with the
// owning unit's uncommitted writes, within [Lower, Upper).
//
// It merges two sorted streams: the engine side (a clone of the unit's snapshot iterator,
// which skips invisible versions and tombstones) and the buffer side (the unit's writes,
// whose tombstones hide engine keys). The buffer side is re-located by binary search on
// every move, so writes made while the cursor is open are seen.
type Cursor struct {
	ru *RecoveryUnit
	// slot is the cursor's index in ru.cursors, -1 once closed.
	slot    int
	ii      *identInfo
	reverse bool
	lower   []byte // user-key bounds, nil = open
	upper   []byte // effective upper bound: the caller's, lowered to the oplog cap
	// userUpper is the caller's upper bound; the oplog cap is recomputed from it on Restore.
	userUpper []byte

	it     *pebble.Iterator
	readTs optime.Timestamp
	// Engine-side current key (user key, aliases the iterator) and payload.
	eValid bool
	eKey   []byte
	eVal   []byte
	pbuf   []byte // scratch for seek keys
	kbuf   []byte // scratch copy of the current key

	// Buffer-side current key and its entry.
	bKey   string
	bValid bool
	bEntry *bufEntry

	// Merged current position.
	valid bool
	key   []byte
	val   []byte
	fromE bool // current position includes the engine side
	fromB bool // current position includes the buffer side
	err   error

	// Save/Restore state.
	positioned bool   // First or Seek was called
	lastKey    []byte // the last key before Next exhausted the cursor
	savedKey   []byte
	// savedState: 0 unpositioned, 1 at savedKey, 2 exhausted with no known last key,
	// 3 exhausted after savedKey (Restore continues after it), 4 redo First, 5 redo
	// Seek(savedKey) (the last two after a prepare conflict: nothing there was returned yet).
	savedState int

	// After a prepare conflict (checkPrepared): how Save/Restore redo the failed move:
	// redoFirst, redoSeek (from conflictFrom inclusive) or redoAfter (after conflictFrom).
	conflictRedo int
	conflictFrom []byte
	// redoState is the saved state whose Restore met the conflict (redoRestore): redoing the
	// Restore keeps its meaning (e.g. "continue after savedKey").
	redoState int
}

const (
	redoFirst = 1 + iota
	redoSeek
	redoAfter
	redoRestore
)

// NewCursor opens a cursor on ident in the unit's snapshot.
func (ru *RecoveryUnit) NewCursor(ident string, opts CursorOptions) (*Cursor, error) {
	ii, err := ru.e.lookupIdent(ident)
	if err != nil {
		return nil, err
	}
	c := &Cursor{ru: ru, ii: ii, reverse: opts.Reverse,
		lower: slices.Clone(opts.Lower), userUpper: slices.Clone(opts.Upper)}
	if err := c.open(); err != nil {
		return nil, err
	}
	c.slot = len(ru.cursors)
	ru.cursors = append(ru.cursors, c)
	return c, nil
}

// open clones the unit's snapshot iterator with the cursor's bounds.
func (c *Cursor) open() error {
	ru := c.ru
	if err := ru.ensureSnapshot(); err != nil {
		return err
	}
	c.readTs = ru.readTs
	upper := c.userUpper
	// Forward oplog cursors under ReadNoTimestamp stop at the visibility point captured when
	// the snapshot opened: nothing at or after the oldest uncommitted timestamp is returned,
	// so a reader never skips over a hole that a slower commit fills later.
	if c.ii.isOplog() && !c.reverse && ru.src == ReadNoTimestamp {
		capKey := recordid.Long(int64(ru.oplogVis) + 1).Key()
		if ru.oplogVis == optime.MaxTimestamp || int64(ru.oplogVis)+1 < 0 {
			capKey = nil
		}
		if capKey != nil && (upper == nil || bytes.Compare(capKey, upper) < 0) {
			upper = capKey
		}
	}
	c.upper = upper
	lo, hi := identBounds(c.ii.id)
	if c.lower != nil {
		lo = appendBareKey(nil, c.ii.id, c.lower)
	}
	if upper != nil {
		hi = appendBareKey(nil, c.ii.id, upper)
	}
	it, err := ru.iter.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{LowerBound: lo, UpperBound: hi}})
	if err != nil {
		return err
	}
	c.it = it
	return nil
}

// First positions at the first key in the cursor's direction.
func (c *Cursor) First() bool {
	if c.it == nil {
		return c.fail(fmt.Errorf("storage: cursor used while saved or closed"))
	}
	c.positioned, c.lastKey = true, nil
	if c.reverse {
		c.eSettleRev(c.it.Last())
		c.bLocate(nil, true)
	} else {
		c.eSettleFwd(c.it.First())
		c.bLocate(nil, true)
	}
	c.merge()
	return c.checkPrepared(nil, true, redoFirst)
}

// Seek positions at the first key >= key (forward) or the last key <= key (reverse).
func (c *Cursor) Seek(key []byte) bool {
	if c.it == nil {
		return c.fail(fmt.Errorf("storage: cursor used while saved or closed"))
	}
	c.positioned, c.lastKey = true, nil
	// Pebble requires seek keys within the iterator bounds, so clamp to them.
	if c.reverse {
		switch {
		case c.lower != nil && bytes.Compare(key, c.lower) < 0:
			c.eValid = false
		case c.upper != nil && bytes.Compare(key, c.upper) >= 0:
			c.eSettleRev(c.it.Last())
		default:
			// Every version of key sorts before the bare key of key‖0x00.
			c.pbuf = appendBareKey(c.pbuf[:0], c.ii.id, key)
			c.pbuf = append(c.pbuf, 0)
			c.eSettleRev(c.it.SeekLT(c.pbuf))
		}
	} else {
		switch {
		case c.upper != nil && bytes.Compare(key, c.upper) >= 0:
			c.eValid = false
		case c.lower != nil && bytes.Compare(key, c.lower) < 0:
			c.eSettleFwd(c.it.First())
		default:
			c.pbuf = appendBareKey(c.pbuf[:0], c.ii.id, key)
			c.eSettleFwd(c.it.SeekGE(c.pbuf))
		}
	}
	c.bLocate(key, true)
	c.merge()
	return c.checkPrepared(key, true, redoSeek)
}

// Next moves to the next key in the cursor's direction.
func (c *Cursor) Next() bool {
	if c.it == nil {
		return c.fail(fmt.Errorf("storage: cursor used while saved or closed"))
	}
	if !c.valid {
		return false
	}
	// The current key may alias the engine iterator, which is about to move; the buffer side
	// needs it afterwards only when the unit has buffered writes to this ident.
	hasBuf := c.ru.bufs[c.ii.id] != nil
	// Remember the key: the buffer side needs it after the engine side moved, and Save needs
	// it if this move exhausts the cursor (a tailable reader resumes after it).
	c.kbuf = append(c.kbuf[:0], c.key...)
	if c.fromE {
		if c.reverse {
			// The iterator sits on the visible version; the bare prefix sorts before all
			// versions of this key.
			c.pbuf = appendBareKey(c.pbuf[:0], c.ii.id, c.eKey)
			c.eSettleRev(c.it.SeekLT(c.pbuf))
		} else {
			c.eSettleFwd(c.it.NextPrefix())
		}
	}
	switch {
	case !hasBuf:
		c.bValid = false
	case c.fromB:
		c.bLocate([]byte(c.bKey), false)
	default:
		c.bLocate(c.kbuf, false)
	}
	c.merge()
	if !c.checkPrepared(c.kbuf, false, redoAfter) {
		c.kbuf, c.lastKey = c.lastKey[:0], c.kbuf
		return false
	}
	return true
}

// checkPrepared fails the cursor with a prepare conflict (prepare.go) if a key of a prepared
// unit lies in the interval the move just crossed: from where it started (from, nil = where
// the direction begins) to the new position inclusive, or to the far bound when exhausted.
// Checking the interval, not only the landing key, catches a prepared insert the cursor's
// view does not contain. It returns c.valid. With nothing prepared it is one atomic load.
func (c *Cursor) checkPrepared(from []byte, fromIncl bool, redo int) bool {
	s := c.ru.e.prep.set.Load()
	if s == nil || c.err != nil {
		return c.valid
	}
	var lo, hi []byte
	var loIncl, hiIncl bool
	if !c.reverse {
		lo, loIncl = from, fromIncl
		if lo == nil || (c.lower != nil && bytes.Compare(lo, c.lower) < 0) {
			lo, loIncl = c.lower, true
		}
		if c.valid {
			hi, hiIncl = c.key, true
		} else {
			hi = c.upper
		}
	} else {
		hi, hiIncl = from, fromIncl
		if hi == nil || (c.upper != nil && bytes.Compare(hi, c.upper) >= 0) {
			hi, hiIncl = c.upper, false
		}
		if c.valid {
			lo, loIncl = c.key, true
		} else {
			lo, loIncl = c.lower, true
		}
	}
	if err := c.ru.checkPreparedRange(s, c.ii, lo, loIncl, hi, hiIncl); err != nil {
		c.conflictRedo = redo
		c.conflictFrom = append(c.conflictFrom[:0], from...)
		return c.fail(err)
	}
	return c.valid
}

// Valid reports whether the cursor is positioned on a key.
func (c *Cursor) Valid() bool { return c.valid }

// Key returns the current key, valid until the next move.
func (c *Cursor) Key() []byte { return c.key }

// Value returns the current value, valid until the next move.
func (c *Cursor) Value() []byte { return c.val }

// Err returns the error that invalidated the cursor, if any.
func (c *Cursor) Err() error { return c.err }

func (c *Cursor) fail(err error) bool {
	if c.err == nil {
		c.err = err
	}
	c.valid = false
	return false
}

// eSettleFwd advances the engine side from the iterator's position to the first key whose
// newest version at or below readTs is a live value.
func (c *Cursor) eSettleFwd(valid bool) {
	it := c.it
	for valid {
		k := it.Key()
		p := splitKey(k)
		if p == len(k) || p < prefixLen+1 {
			c.fail(fmt.Errorf("%w: unversioned key %s in ident %s", ErrCorrupt, keyFormatter(k), c.ii.name))
			break
		}
		if versionTs(k, p) > c.readTs {
			c.pbuf = append(c.pbuf[:0], k[:p]...)
			c.pbuf = appendVersionSuffix(c.pbuf, c.readTs)
			valid = it.SeekGE(c.pbuf)
			if valid && !bytes.Equal(it.Key()[:splitKey(it.Key())], c.pbuf[:p]) {
				continue // no visible version of that key; now on the next key
			}
			if !valid {
				break
			}
			k = it.Key()
		}
		v, err := it.ValueAndErr()
		if err != nil {
			c.fail(err)
			break
		}
		payload, tomb, err := decodeValue(v)
		if err != nil {
			c.fail(fmt.Errorf("ident %s key %s: %w", c.ii.name, keyFormatter(k), err))
			break
		}
		if tomb {
			valid = it.NextPrefix()
			continue
		}
		c.eValid, c.eKey, c.eVal = true, k[prefixLen:p-1], payload
		return
	}
	if err := it.Error(); err != nil {
		c.fail(err)
	}
	c.eValid, c.eKey, c.eVal = false, nil, nil
}

// eSettleRev moves the engine side backwards from the iterator's position (on some version
// of a key) to the last key that has a visible live version, leaving the iterator on it.
func (c *Cursor) eSettleRev(valid bool) {
	it := c.it
	for valid {
		k := it.Key()
		p := splitKey(k)
		if p == len(k) || p < prefixLen+1 {
			c.fail(fmt.Errorf("%w: unversioned key %s in ident %s", ErrCorrupt, keyFormatter(k), c.ii.name))
			break
		}
		c.pbuf = append(c.pbuf[:0], k[:p]...)
		c.pbuf = appendVersionSuffix(c.pbuf, c.readTs)
		if it.SeekGE(c.pbuf) {
			k2 := it.Key()
			if p2 := splitKey(k2); p2 == p && bytes.Equal(k2[:p2], c.pbuf[:p]) {
				v, err := it.ValueAndErr()
				if err != nil {
					c.fail(err)
					break
				}
				payload, tomb, err := decodeValue(v)
				if err != nil {
					c.fail(fmt.Errorf("ident %s key %s: %w", c.ii.name, keyFormatter(k2), err))
					break
				}
				if !tomb {
					c.eValid, c.eKey, c.eVal = true, k2[prefixLen:p2-1], payload
					return
				}
			}
		}
		// No live visible version: go to the previous key (its bare key sorts first).
		valid = it.SeekLT(c.pbuf[:p])
	}
	if err := it.Error(); err != nil {
		c.fail(err)
	}
	c.eValid, c.eKey, c.eVal = false, nil, nil
}

// bLocate positions the buffer side at the first buffered key after from (or at it when
// inclusive) in the cursor's direction and within the bounds; from == nil means the start.
// Each call is one O(log n) tree seek.
func (c *Cursor) bLocate(from []byte, inclusive bool) {
	c.bValid, c.bEntry = false, nil
	b := c.ru.bufs[c.ii.id]
	if b == nil || b.tree.n == 0 {
		return
	}
	var it ktItem
	var ok bool
	if !c.reverse {
		switch {
		case c.lower != nil && (from == nil || bytes.Compare(from, c.lower) < 0):
			it, ok = b.tree.seekGE(string(c.lower), false)
		case from == nil:
			it, ok = b.tree.first()
		default:
			it, ok = b.tree.seekGE(string(from), !inclusive)
		}
		if !ok || (c.upper != nil && it.key >= string(c.upper)) {
			return
		}
	} else {
		switch {
		case c.upper != nil && (from == nil || bytes.Compare(from, c.upper) >= 0):
			it, ok = b.tree.seekLE(string(c.upper), true)
		case from == nil:
			it, ok = b.tree.last()
		default:
			it, ok = b.tree.seekLE(string(from), !inclusive)
		}
		if !ok || (c.lower != nil && it.key < string(c.lower)) {
			return
		}
	}
	c.bKey, c.bValid, c.bEntry = it.key, true, it.e
}

// merge combines the two sides into the current position, skipping buffered tombstones.
func (c *Cursor) merge() bool {
	for {
		if c.err != nil {
			c.valid = false
			return false
		}
		switch {
		case !c.eValid && !c.bValid:
			c.valid, c.key, c.val, c.fromE, c.fromB = false, nil, nil, false, false
			return false
		case !c.bValid:
			c.valid, c.key, c.val, c.fromE, c.fromB = true, c.eKey, c.eVal, true, false
			return true
		}
		cmp := -1 // buffer side first
		if c.eValid {
			cmp = bytes.Compare([]byte(c.bKey), c.eKey)
			if c.reverse {
				cmp = -cmp
			}
		}
		if cmp > 0 {
			c.valid, c.key, c.val, c.fromE, c.fromB = true, c.eKey, c.eVal, true, false
			return true
		}
		if !c.bEntry.tomb {
			c.valid, c.key, c.val, c.fromE, c.fromB = true, []byte(c.bKey), c.bEntry.val[1:], cmp == 0, true
			return true
		}
		// A buffered deletion hides the engine key with the same user key.
		if cmp == 0 {
			if c.reverse {
				c.pbuf = appendBareKey(c.pbuf[:0], c.ii.id, c.eKey)
				c.eSettleRev(c.it.SeekLT(c.pbuf))
			} else {
				c.eSettleFwd(c.it.NextPrefix())
			}
		}
		c.bLocate([]byte(c.bKey), false)
	}
}

// Save remembers the position so the unit can abandon its snapshot (yield) and releases the
// cursor's view.
func (c *Cursor) Save() {
	if c.it == nil {
		return
	}
	switch {
	case c.conflictRedo != 0 && IsPrepareConflict(c.err):
		// Redo the move that met the prepare conflict once the caller has a new snapshot.
		if c.conflictRedo != redoRestore {
			c.savedKey = append(c.savedKey[:0], c.conflictFrom...)
		}
		switch c.conflictRedo {
		case redoRestore:
			c.savedState = c.redoState // savedKey is unchanged
		case redoFirst:
			c.savedState = 4
		case redoSeek:
			c.savedState = 5
		default:
			c.savedState = 3 // continue after the key before the conflict
		}
		c.err = nil
	case c.valid:
		c.savedKey = append(c.savedKey[:0], c.key...)
		c.savedState = 1
	case c.positioned && c.lastKey != nil && c.err == nil:
		c.savedKey = append(c.savedKey[:0], c.lastKey...)
		c.savedState = 3
	case c.positioned:
		c.savedState = 2
	default:
		c.savedState = 0
	}
	_ = c.it.Close()
	c.it = nil
	c.conflictRedo = 0
	c.valid, c.eValid, c.bValid = false, false, false
}

// Restore reopens the cursor in the unit's current snapshot and repositions at the saved key
// or the next one in direction. It reports whether the cursor is positioned.
func (c *Cursor) Restore() (bool, error) {
	if c.it != nil {
		return c.valid, c.err
	}
	if err := c.open(); err != nil {
		c.err = err
		return false, err
	}
	var ok bool
	switch c.savedState {
	case 1, 5:
		ok = c.Seek(c.savedKey)
	case 4:
		ok = c.First()
	case 3:
		ok = c.Seek(c.savedKey)
		if ok && bytes.Equal(c.key, c.savedKey) {
			ok = c.Next()
		}
	default:
		return false, nil
	}
	if c.conflictRedo != 0 {
		c.conflictRedo, c.redoState = redoRestore, c.savedState
	}
	return ok, c.err
}

// restoredExact reports whether, after Restore, the cursor is on exactly the saved key.
func (c *Cursor) restoredExact() bool {
	return c.savedState == 1 && c.valid && bytes.Equal(c.key, c.savedKey)
}

// Close releases the cursor.
func (c *Cursor) Close() {
	if c.it != nil {
		_ = c.it.Close()
		c.it = nil
	}
	if cs := c.ru.cursors; c.slot >= 0 && c.slot < len(cs) && cs[c.slot] == c {
		last := cs[len(cs)-1]
		cs[c.slot], last.slot = last, c.slot
		c.ru.cursors = cs[:len(cs)-1]
	}
	c.slot = -1
	c.valid = false
}
