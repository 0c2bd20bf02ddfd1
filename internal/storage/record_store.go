package storage

import (
	"errors"
	"fmt"
	"sync/atomic"

	"humongo/internal/mongoerr"
	"humongo/internal/recordid"
)

// RecordStore is a collection's table of BSON documents keyed by RecordId (recordid Key()).
// It maintains the ident's fast counts through AdjustCounts.
type RecordStore struct {
	e     *Engine
	ident string
	// nextID is the next long RecordId Insert hands out. Ids are never reused while the
	// process runs; across restarts the counter restarts above the largest key that has any
	// version, so ids of deleted records still in history are not reused either.
	nextID atomic.Int64
}

// OpenRecordStore opens the record store on ident.
func OpenRecordStore(e *Engine, ident string) (*RecordStore, error) {
	ii, err := e.lookupIdent(ident)
	if err != nil {
		return nil, err
	}
	rs := &RecordStore{e: e, ident: ident}
	maxID, err := e.maxLongRecordID(ii)
	if err != nil {
		return nil, err
	}
	rs.nextID.Store(max(maxID, 0) + 1)
	return rs, nil
}

// maxLongRecordID returns the largest long RecordId with any version in ii (0 if none).
func (e *Engine) maxLongRecordID(ii *identInfo) (int64, error) {
	lo := appendBareKey(nil, ii.id, []byte{0x10})
	hi := appendBareKey(nil, ii.id, []byte{0x11})
	it, err := e.db.NewIter(nil)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	it.SetBounds(lo, hi)
	if !it.Last() {
		return 0, it.Error()
	}
	_, uk, _, _, err := decodeEngineKey(it.Key())
	if err != nil {
		return 0, err
	}
	id, err := recordid.FromKey(uk)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return id.Int64(), nil
}

// Ident returns the record store's ident.
func (rs *RecordStore) Ident() string { return rs.ident }

// Insert stores doc under a newly allocated long RecordId.
func (rs *RecordStore) Insert(ru *RecoveryUnit, doc []byte) (recordid.ID, error) {
	id := recordid.Long(rs.nextID.Add(1) - 1)
	if err := ru.Put(rs.ident, id.Key(), doc); err != nil {
		return recordid.ID{}, err
	}
	ru.AdjustCounts(rs.ident, 1, int64(len(doc)))
	return id, nil
}

// InsertWithID stores doc under id (clustered collections, oplog); DuplicateKey if a record
// with id exists.
func (rs *RecordStore) InsertWithID(ru *RecoveryUnit, id recordid.ID, doc []byte) error {
	if id.IsNull() {
		return errors.New("storage: null RecordId")
	}
	key := id.Key()
	if _, found, err := ru.Get(rs.ident, key); err != nil {
		return err
	} else if found {
		return mongoerr.Newf(mongoerr.DuplicateKey, "record %v already exists", id)
	}
	if err := ru.Put(rs.ident, key, doc); err != nil {
		return err
	}
	if id.IsLong() {
		for {
			cur := rs.nextID.Load()
			if id.Int64() < cur || rs.nextID.CompareAndSwap(cur, id.Int64()+1) {
				break
			}
		}
	}
	ru.AdjustCounts(rs.ident, 1, int64(len(doc)))
	return nil
}

// Update replaces the document of an existing record.
func (rs *RecordStore) Update(ru *RecoveryUnit, id recordid.ID, doc []byte) error {
	key := id.Key()
	old, found, err := ru.Get(rs.ident, key)
	if err != nil {
		return err
	}
	if !found {
		return mongoerr.Newf(mongoerr.NoSuchKey, "record %v not found", id)
	}
	if err := ru.Put(rs.ident, key, doc); err != nil {
		return err
	}
	ru.AdjustCounts(rs.ident, 0, int64(len(doc)-len(old)))
	return nil
}

// Delete removes a record.
func (rs *RecordStore) Delete(ru *RecoveryUnit, id recordid.ID) error {
	key := id.Key()
	old, found, err := ru.Get(rs.ident, key)
	if err != nil {
		return err
	}
	if !found {
		return mongoerr.Newf(mongoerr.NoSuchKey, "record %v not found", id)
	}
	if err := ru.Delete(rs.ident, key); err != nil {
		return err
	}
	ru.AdjustCounts(rs.ident, -1, -int64(len(old)))
	return nil
}

// Get returns a copy of the record's document.
func (rs *RecordStore) Get(ru *RecoveryUnit, id recordid.ID) ([]byte, bool, error) {
	return ru.Get(rs.ident, id.Key())
}

// Counts returns the record store's fast counts.
func (rs *RecordStore) Counts() (records, dataSize int64) { return rs.e.Counts(rs.ident) }

// RecordCursor iterates records in RecordId order (descending when reverse).
type RecordCursor struct {
	c *Cursor
	// returned is true when the cursor's current position has already been handed out, so
	// Next must move first.
	started  bool
	returned bool
	err      error
}

// NewCursor opens a record cursor.
func (rs *RecordStore) NewCursor(ru *RecoveryUnit, reverse bool) (*RecordCursor, error) {
	c, err := ru.NewCursor(rs.ident, CursorOptions{Reverse: reverse})
	if err != nil {
		return nil, err
	}
	return &RecordCursor{c: c}, nil
}

// Next returns the next record; doc is valid until the next call.
func (rc *RecordCursor) Next() (recordid.ID, []byte, bool) {
	var ok bool
	switch {
	case !rc.started:
		rc.started = true
		ok = rc.c.First()
	case rc.returned:
		ok = rc.c.Next()
	default:
		ok = rc.c.Valid()
	}
	return rc.current(ok)
}

// SeekID positions at the first record at or after id in the cursor's direction and returns it.
func (rc *RecordCursor) SeekID(id recordid.ID) (recordid.ID, []byte, bool) {
	rc.started = true
	return rc.current(rc.c.Seek(id.Key()))
}

func (rc *RecordCursor) current(ok bool) (recordid.ID, []byte, bool) {
	if !ok {
		rc.returned = false
		return recordid.ID{}, nil, false
	}
	id, err := recordid.FromKey(rc.c.Key())
	if err != nil {
		rc.err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		return recordid.ID{}, nil, false
	}
	rc.returned = true
	return id, rc.c.Value(), true
}

// Err returns the cursor's error.
func (rc *RecordCursor) Err() error {
	if rc.err != nil {
		return rc.err
	}
	return rc.c.Err()
}

// Save prepares for a yield.
func (rc *RecordCursor) Save() { rc.c.Save() }

// Restore repositions after a yield: the next Next returns the first record after the last
// one returned (skipping it if it still exists). It reports whether a record is available.
func (rc *RecordCursor) Restore() (bool, error) {
	ok, err := rc.c.Restore()
	if err != nil {
		return false, err
	}
	// If the saved record still exists we are on it and it was already returned; otherwise
	// we are on its successor, which was not.
	rc.returned = ok && rc.c.restoredExact()
	return ok, nil
}

// Close releases the cursor.
func (rc *RecordCursor) Close() { rc.c.Close() }
