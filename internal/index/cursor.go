package index

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// Bound is one end of an index scan: a key prefix (values for the first len(Values) fields of
// the key pattern, in pattern order) and whether keys equal to it on those fields are included.
// A nil *Bound means unbounded.
type Bound struct {
	Values    []bsoncore.Value
	Inclusive bool
}

// ScanOptions describe an index scan. Low and High are in index key order — the order of the
// KeyStrings, which already accounts for descending fields — so Low <= High always; Reverse
// walks from High down to Low. For {a: -1}, the keys a <= 5 are Low = {5, inclusive}.
type ScanOptions struct {
	Low, High *Bound
	Reverse   bool
}

// Cursor scans an index. Not safe for concurrent use; valid while its RecoveryUnit's snapshot
// is (Save/Restore around yields).
type Cursor struct {
	ix   *Index
	c    *storage.Cursor
	rid  recordid.ID
	key  []byte // KeyString without RecordId, aliasing the storage cursor
	tb   []byte
	err  error
	init bool
	rev  bool
	// saved is the storage key of the current entry at Save; pending means Restore landed on
	// a successor that Next must return without moving.
	saved   []byte
	pending bool
	done    bool
}

// boundKey builds the KeyString bound for b. below selects the side of equal keys:
// below=true sorts before every key equal to b's values (an inclusive low bound or an
// exclusive high bound), below=false after all of them.
func (ix *Index) boundKey(dst []byte, b *Bound, below bool) ([]byte, error) {
	var kb keystring.Builder
	kb.Reset(ix.ord)
	var ckey []byte
	for _, v := range b.Values {
		// Bounds are values; a collated index compares their collation keys.
		v, ckey = ix.coll.AppendValueKey(ckey[:0], v)
		kb.AppendValue(v)
	}
	switch {
	case below && len(b.Values) == len(ix.fieldNames):
		// A full key: Inclusive sorts before key+RecordId and equals the _id entry.
		kb.AppendDiscriminator(keystring.Inclusive)
	case below:
		kb.AppendDiscriminator(keystring.ExclusiveBefore)
	default:
		kb.AppendDiscriminator(keystring.ExclusiveAfter)
	}
	out := kb.Bytes()
	if err := kb.Err(); err != nil {
		return nil, err
	}
	return append(dst[:0], out...), nil
}

// NewCursor opens a scan over ru's snapshot.
func (ix *Index) NewCursor(ru *storage.RecoveryUnit, o ScanOptions) (*Cursor, error) {
	var co storage.CursorOptions
	var err error
	if o.Low != nil {
		// Inclusive low: before all equal keys. Exclusive low: after all of them.
		if co.Lower, err = ix.boundKey(nil, o.Low, o.Low.Inclusive); err != nil {
			return nil, err
		}
	}
	if o.High != nil {
		// Upper is exclusive in storage: inclusive high → after all equal keys.
		if co.Upper, err = ix.boundKey(nil, o.High, !o.High.Inclusive); err != nil {
			return nil, err
		}
	}
	co.Reverse = o.Reverse
	c, err := ru.NewCursor(ix.ident, co)
	if err != nil {
		return nil, err
	}
	return &Cursor{ix: ix, c: c, rev: o.Reverse}, nil
}

// Next advances to the next entry in scan order.
func (c *Cursor) Next() bool {
	if c.err != nil {
		return false
	}
	var ok bool
	switch {
	case c.done:
		return false
	case !c.init:
		c.init = true
		ok = c.c.First()
	case c.pending:
		c.pending = false
		ok = c.c.Valid()
	default:
		ok = c.c.Next()
	}
	if !ok {
		c.err = c.c.Err()
		return false
	}
	return c.decodeCurrent()
}

// Seek positions at the first entry >= key (forward) or the last <= key (reverse), where key
// is a KeyString bound such as one built for a Bound; the planner uses it to skip ahead.
func (c *Cursor) Seek(key []byte) bool {
	c.init = true
	if !c.c.Seek(key) {
		c.err = c.c.Err()
		return false
	}
	return c.decodeCurrent()
}

func (c *Cursor) decodeCurrent() bool {
	k, v := c.c.Key(), c.c.Value()
	if c.ix.isID {
		rid, tb, err := decodeIDValue(v)
		if err != nil {
			c.err = err
			return false
		}
		c.key, c.rid, c.tb = k, rid, tb
		return true
	}
	rid, n, err := keystring.DecodeRecordIDAtEnd(k)
	if err != nil {
		c.err = mongoerr.Newf(mongoerr.DataCorruptionDetected, "index %s: %v", c.ix.name, err)
		return false
	}
	c.key, c.rid, c.tb = k[:n], rid, v
	return true
}

// KeyString returns the current entry's KeyString without RecordId (valid until the next move).
func (c *Cursor) KeyString() []byte { return c.key }

// TypeBits returns the current entry's TypeBits (valid until the next move).
func (c *Cursor) TypeBits() []byte { return c.tb }

// RecordID returns the current entry's RecordId.
func (c *Cursor) RecordID() recordid.ID { return c.rid }

// Key decodes the current entry's key values with their original types (covered queries).
// The values are freshly allocated.
func (c *Cursor) Key() ([]bsoncore.Value, error) {
	return keystring.Decode(c.key, c.ix.ord, c.tb)
}

// KeyDocument returns the current key as MongoDB shows it ({"": v1, ...}).
func (c *Cursor) KeyDocument() (bsoncore.Document, error) {
	vals, err := c.Key()
	if err != nil {
		return nil, err
	}
	return keystring.ToBSONKey(vals), nil
}

// Err returns the error that stopped the scan.
func (c *Cursor) Err() error { return c.err }

// Save prepares for the RecoveryUnit abandoning its snapshot (a yield).
func (c *Cursor) Save() {
	c.saved = c.saved[:0]
	if c.init && !c.pending && c.c.Valid() {
		c.saved = append(c.saved, c.c.Key()...)
	}
	c.c.Save()
}

// Restore repositions after a yield. Callers continue with Next, which returns the first
// entry after the last one returned (that entry itself is not returned again, and an entry
// that replaced it in between is returned).
func (c *Cursor) Restore() error {
	ok, err := c.c.Restore()
	if err != nil {
		return err
	}
	if !c.init {
		return nil
	}
	switch {
	case !ok:
		c.done, c.pending = true, false
	case len(c.saved) == 0 || !bytes.Equal(c.c.Key(), c.saved):
		c.pending = true
	}
	return nil
}

// Close releases the cursor.
func (c *Cursor) Close() { c.c.Close() }

// FindRecordID looks up an exact key in a unique index (the _id lookup of point reads):
// values must cover every field. found is false when no entry matches.
func (ix *Index) FindRecordID(ru *storage.RecoveryUnit, values []bsoncore.Value) (recordid.ID, bool, error) {
	s := getScratch()
	defer putScratch(s)
	s.b.Reset(ix.ord)
	for _, v := range values {
		v, s.ckey = ix.coll.AppendValueKey(s.ckey[:0], v)
		s.b.AppendValue(v)
	}
	prefix := s.b.Bytes()
	if err := s.b.Err(); err != nil {
		return recordid.ID{}, false, err
	}
	if ix.isID {
		v, found, err := ru.Get(ix.ident, prefix)
		if err != nil || !found {
			return recordid.ID{}, false, err
		}
		rid, _, err := decodeIDValue(v)
		return rid, err == nil, err
	}
	s.bound = prefixUpper(s.bound, prefix)
	c, err := ru.NewCursor(ix.ident, storage.CursorOptions{Lower: prefix, Upper: s.bound})
	if err != nil {
		return recordid.ID{}, false, err
	}
	defer c.Close()
	if !c.First() {
		return recordid.ID{}, false, c.Err()
	}
	rid, _, err := keystring.DecodeRecordIDAtEnd(c.Key())
	return rid, err == nil, err
}
