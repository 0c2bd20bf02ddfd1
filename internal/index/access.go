package index

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/collation"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// Index is the access method of one index over its storage ident (spec: "Use in WiredTiger
// indexes"). Storage formats:
//
//	_id index (format 8):              key = KeyString (ends kEnd, no RecordId)
//	                                   value = uvarint(len(rid)) rid.Key() TypeBits
//	secondary, unique or not (8 / 14): key = KeyString + RecordId suffix
//	                                   value = TypeBits
//
// Unique secondary indexes keep format 14 (the RecordId in the key, so oplog application and
// index builds may hold duplicates transiently). Uniqueness is checked by a prefix seek over
// the keys sharing the KeyString; to make two concurrent inserts of the same KeyString with
// different RecordIds collide in storage, the inserter also writes (a tombstone for) the
// KeyString without RecordId, as WiredTigerIndexUnique does with its insert-and-remove of the
// prefix key: the engine's first-updater-wins rule then turns the race into a WriteConflict,
// and the retry sees the committed key and reports DuplicateKey. The tombstone leaves no live
// key behind, so scans never see it.
//
// Safe for concurrent use: all per-call state lives in pooled scratch buffers.
type Index struct {
	ns     string
	name   string
	ident  string
	isID   bool
	unique bool
	// prepareUnique (collMod's first step of a conversion to unique, spec: "Convert to
	// unique"): new keys are checked like a unique index's, but duplicates that already exist
	// are tolerated, so builds and validation treat the index as non-unique.
	prepareUnique bool
	gen           *KeyGenerator
	ord           keystring.Ordering
	// keyPattern and fieldNames serve DuplicateKey errors (keyPattern/keyValue).
	keyPattern bsoncore.Document
	fieldNames []string
	meta       catalog.IndexMeta
	// coll is the index's collation (nil: simple). Keys then hold the collation keys of
	// strings, as MongoDB's KeyString holds ICU sort keys: such keys cannot be decoded back to
	// the strings, so the planner never covers a query with a collated index.
	coll *collation.Collator
	// usage is shared by the copies current() makes on rename or multikey changes, so the
	// count survives them (usage.go).
	usage *Usage
}

// NewIndex returns the access method for meta, an index of collection ns. filter implements
// meta's partialFilterExpression (nil when there is none or the query layer is not wired in).
func NewIndex(ns string, meta *catalog.IndexMeta, filter Filter) (*Index, error) {
	gen, err := NewKeyGenerator(meta.KeyPattern, KeyGenOptions{Sparse: meta.Sparse, Filter: filter})
	if err != nil {
		return nil, err
	}
	var coll *collation.Collator
	if meta.Collation != nil {
		if coll, err = collation.Parse(meta.Collation); err != nil {
			return nil, err
		}
	}
	ix := &Index{
		coll: coll,
		ns:   ns, name: meta.Name, ident: meta.Ident,
		isID:          meta.IsIDIndex(),
		unique:        meta.Unique || meta.IsIDIndex(),
		prepareUnique: specTrue(meta.Spec, "prepareUnique"),
		gen:           gen,
		ord:           keystring.Ordering(gen.DescendingMask()),
		keyPattern:    slices.Clone(meta.KeyPattern),
		fieldNames:    gen.Paths(),
		meta:          *meta,
		usage:         newUsage(),
	}
	return ix, nil
}

// specTrue reports whether spec's field name is true (booleans; numbers by value, as MongoDB
// coerces index options). A malformed spec reads as false: the catalog validated it.
func specTrue(spec bsoncore.Document, name string) bool {
	v, err := spec.LookupErr(name)
	if err != nil {
		return false
	}
	switch v.Type {
	case bsoncore.TypeBoolean:
		return v.Boolean()
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble:
		f, ok := v.AsFloat64OK()
		return ok && f != 0
	}
	return false
}

// Name is the index name; Ident its storage table.
func (ix *Index) Name() string  { return ix.name }
func (ix *Index) Ident() string { return ix.ident }

// IsID reports whether this is the _id index; Unique whether keys must be unique.
func (ix *Index) IsID() bool   { return ix.isID }
func (ix *Index) Unique() bool { return ix.unique }

// PrepareUnique reports whether the index rejects new duplicate keys while tolerating existing
// ones (collMod prepareUnique: true on a non-unique index).
func (ix *Index) PrepareUnique() bool { return ix.prepareUnique }

// Ordering is the KeyString ordering of the key pattern.
func (ix *Index) Ordering() keystring.Ordering { return ix.ord }

// KeyGenerator returns the index's key generator.
func (ix *Index) KeyGenerator() *KeyGenerator { return ix.gen }

// Collator returns the index's collation; nil is the simple (binary) collation.
func (ix *Index) Collator() *collation.Collator { return ix.coll }

// Meta returns the catalog metadata the access method was built from.
func (ix *Index) Meta() *catalog.IndexMeta { return &ix.meta }

// encodedKey is one generated key of a document, as byte ranges of scratch.buf.
type encodedKey struct {
	off       int // start in buf
	prefixLen int // KeyString without RecordId (ends with kEnd)
	fullLen   int // with the RecordId suffix (secondary indexes); == prefixLen for _id
	tbLen     int // TypeBits follow the full key
}

// keys holds the encoded, sorted, deduplicated keys of one document for one index.
type keys struct {
	buf  []byte
	list []encodedKey
	// multikey reports whether the document makes the index multikey; paths holds the
	// per-field component masks.
	multikey bool
	paths    []uint64
	skipped  bool
}

func (k *keys) prefix(e encodedKey) []byte   { return k.buf[e.off : e.off+e.prefixLen] }
func (k *keys) full(e encodedKey) []byte     { return k.buf[e.off : e.off+e.fullLen] }
func (k *keys) typeBits(e encodedKey) []byte { return k.buf[e.off+e.fullLen : e.off+e.fullLen+e.tbLen] }

// scratch is the reusable per-call state of index operations.
type scratch struct {
	ks    KeySet
	b     keystring.Builder
	k     [2]keys // old and new keys for updates
	val   []byte
	bound []byte
	ckey  []byte // collation key of the value being encoded
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch  { return scratchPool.Get().(*scratch) }
func putScratch(s *scratch) { scratchPool.Put(s) }

// genKeys generates and encodes doc's keys for rid into out.
func (ix *Index) genKeys(s *scratch, doc bsoncore.Document, rid recordid.ID, out *keys) error {
	out.buf, out.list, out.multikey, out.skipped = out.buf[:0], out.list[:0], false, false
	if err := ix.gen.GetKeys(doc, &s.ks); err != nil {
		return err
	}
	out.skipped = s.ks.Skipped
	n := s.ks.Len()
	for i := 0; i < n; i++ {
		s.b.Reset(ix.ord)
		for _, v := range s.ks.Key(i) {
			v, s.ckey = ix.coll.AppendValueKey(s.ckey[:0], v) // nil coll: v unchanged
			s.b.AppendValue(v)
		}
		prefix := s.b.Bytes()
		if err := s.b.Err(); err != nil {
			return err
		}
		e := encodedKey{off: len(out.buf), prefixLen: len(prefix)}
		out.buf = append(out.buf, prefix...)
		if !ix.isID {
			s.b.AppendRecordID(rid)
			full := s.b.Bytes()
			out.buf = append(out.buf, full[len(prefix):]...)
		}
		e.fullLen = len(out.buf) - e.off
		tb := s.b.TypeBits()
		out.buf = append(out.buf, tb...)
		e.tbLen = len(tb)
		out.list = append(out.list, e)
	}
	if len(out.list) > 1 {
		// KeyStringSet: sorted by KeyString, equal KeyStrings (1 and 1.0) kept once.
		slices.SortFunc(out.list, func(a, b encodedKey) int { return bytes.Compare(out.prefix(a), out.prefix(b)) })
		out.list = slices.CompactFunc(out.list, func(a, b encodedKey) bool {
			return bytes.Equal(out.prefix(a), out.prefix(b))
		})
	}
	out.multikey = len(out.list) > 1 || s.ks.HasMultikeyPaths()
	if out.multikey {
		out.paths = append(out.paths[:0], s.ks.multikey...)
	}
	return nil
}

// MultikeyPathsBool converts component masks to the catalog's [][]bool form.
func (ix *Index) MultikeyPathsBool(masks []uint64) [][]bool {
	out := make([][]bool, len(ix.gen.fields))
	for i, f := range ix.gen.fields {
		out[i] = make([]bool, f.parts)
		if i < len(masks) {
			for c := 0; c < f.parts; c++ {
				out[i][c] = masks[i]&(1<<c) != 0
			}
		}
	}
	return out
}

// writeOpts control index writes.
type writeOpts struct {
	// dupsAllowed skips the uniqueness check (index build drains, oplog application); the
	// caller tracks duplicates itself.
	dupsAllowed bool
}

// idValue encodes the _id index value: uvarint(len(rid)) rid TypeBits.
func appendIDValue(dst []byte, rid recordid.ID, tb []byte) []byte {
	var rk [16]byte
	r := rid.AppendKey(rk[:0])
	dst = binary.AppendUvarint(dst, uint64(len(r)))
	dst = append(dst, r...)
	return append(dst, tb...)
}

func decodeIDValue(v []byte) (recordid.ID, []byte, error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return recordid.ID{}, nil, mongoerr.New(mongoerr.DataCorruptionDetected, "corrupt _id index entry")
	}
	rid, err := recordid.FromKey(v[w : w+int(n)])
	if err != nil {
		return recordid.ID{}, nil, mongoerr.Newf(mongoerr.DataCorruptionDetected, "corrupt _id index entry: %v", err)
	}
	return rid, v[w+int(n):], nil
}

// insertKeys writes the encoded keys for rid. With a uniqueness violation it returns
// DuplicateKey without having written the offending key.
func (ix *Index) insertKeys(ru *storage.RecoveryUnit, s *scratch, k *keys, rid recordid.ID, o writeOpts) error {
	for _, e := range k.list {
		if err := ix.insertKey(ru, s, k.prefix(e), k.full(e), k.typeBits(e), rid, o); err != nil {
			return err
		}
	}
	return nil
}

func (ix *Index) insertKey(ru *storage.RecoveryUnit, s *scratch, prefix, full, tb []byte, rid recordid.ID, o writeOpts) error {
	if ix.isID {
		if !o.dupsAllowed {
			old, found, err := ru.Get(ix.ident, prefix)
			if err != nil {
				return err
			}
			if found {
				orid, _, err := decodeIDValue(old)
				if err != nil {
					return err
				}
				if recordid.Compare(orid, rid) != 0 {
					return ix.dupKeyError(prefix, tb)
				}
			}
		}
		s.val = appendIDValue(s.val[:0], rid, tb)
		return ru.Put(ix.ident, prefix, s.val)
	}
	// prepareUnique gets the same check: only keys being added are checked, so the
	// duplicates already in the index stay, and an update that keeps its key is not refused.
	if (ix.unique || ix.prepareUnique) && !o.dupsAllowed {
		dup, err := ix.hasOtherEntry(ru, prefix, rid)
		if err != nil {
			return err
		}
		if dup {
			return ix.dupKeyError(prefix, tb)
		}
		// The conflict guard: see the Index doc comment.
		if err := ru.Delete(ix.ident, prefix); err != nil {
			return err
		}
	}
	return ru.Put(ix.ident, full, tb)
}

// prefixUpper returns the exclusive upper bound of keys starting with prefix (which ends with
// kEnd, so incrementing its last byte cannot overflow).
func prefixUpper(dst, prefix []byte) []byte {
	dst = append(dst[:0], prefix...)
	dst[len(dst)-1]++
	return dst
}

// hasOtherEntry reports whether the index has an entry with KeyString prefix and a RecordId
// other than rid.
func (ix *Index) hasOtherEntry(ru *storage.RecoveryUnit, prefix []byte, rid recordid.ID) (bool, error) {
	upper := prefixUpper(nil, prefix)
	c, err := ru.NewCursor(ix.ident, storage.CursorOptions{Lower: prefix, Upper: upper})
	if err != nil {
		return false, err
	}
	defer c.Close()
	for ok := c.First(); ok; ok = c.Next() {
		orid, n, err := keystring.DecodeRecordIDAtEnd(c.Key())
		if err != nil {
			return false, err
		}
		if n != len(prefix) {
			continue // a longer KeyString that shares bytes; cannot happen with kEnd, but be safe
		}
		if recordid.Compare(orid, rid) != 0 {
			return true, nil
		}
	}
	return false, c.Err()
}

// countEntries counts index entries whose KeyString is prefix (up to limit).
func (ix *Index) countEntries(ru *storage.RecoveryUnit, prefix []byte, limit int) (int, error) {
	if ix.isID {
		_, found, err := ru.Get(ix.ident, prefix)
		if found {
			return 1, err
		}
		return 0, err
	}
	upper := prefixUpper(nil, prefix)
	c, err := ru.NewCursor(ix.ident, storage.CursorOptions{Lower: prefix, Upper: upper})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	n := 0
	for ok := c.First(); ok && n < limit; ok = c.Next() {
		n++
	}
	return n, c.Err()
}

func (ix *Index) removeKeys(ru *storage.RecoveryUnit, k *keys) error {
	for _, e := range k.list {
		if err := ru.Delete(ix.ident, k.full(e)); err != nil {
			return err
		}
	}
	return nil
}

// Insert indexes doc under rid. multikey reports whether doc makes the index multikey (with
// paths, per-field component masks, valid until the next call with the same scratch); the
// write path records it in the catalog.
func (ix *Index) Insert(ru *storage.RecoveryUnit, doc bsoncore.Document, rid recordid.ID) (multikey bool, paths [][]bool, err error) {
	s := getScratch()
	defer putScratch(s)
	k := &s.k[0]
	if err := ix.genKeys(s, doc, rid, k); err != nil {
		return false, nil, err
	}
	if err := ix.insertKeys(ru, s, k, rid, writeOpts{}); err != nil {
		return false, nil, err
	}
	if k.multikey {
		return true, ix.MultikeyPathsBool(k.paths), nil
	}
	return false, nil, nil
}

// Remove unindexes doc stored under rid.
func (ix *Index) Remove(ru *storage.RecoveryUnit, doc bsoncore.Document, rid recordid.ID) error {
	s := getScratch()
	defer putScratch(s)
	k := &s.k[0]
	if err := ix.genKeys(s, doc, rid, k); err != nil {
		return err
	}
	return ix.removeKeys(ru, k)
}

// Update replaces oldDoc's keys by newDoc's for rid, touching only keys that changed.
func (ix *Index) Update(ru *storage.RecoveryUnit, oldDoc, newDoc bsoncore.Document, rid recordid.ID) (multikey bool, paths [][]bool, err error) {
	s := getScratch()
	defer putScratch(s)
	mk, err := ix.update(ru, s, oldDoc, newDoc, rid)
	if err != nil || !mk {
		return false, nil, err
	}
	return true, ix.MultikeyPathsBool(s.k[1].paths), nil
}

func (ix *Index) update(ru *storage.RecoveryUnit, s *scratch, oldDoc, newDoc bsoncore.Document, rid recordid.ID) (bool, error) {
	ok, nk := &s.k[0], &s.k[1]
	if err := ix.genKeys(s, oldDoc, rid, ok); err != nil {
		return false, err
	}
	if err := ix.genKeys(s, newDoc, rid, nk); err != nil {
		return false, err
	}
	if err := diffKeys(ok, nk, func(e encodedKey) error { return ru.Delete(ix.ident, ok.full(e)) },
		func(e encodedKey) error {
			return ix.insertKey(ru, s, nk.prefix(e), nk.full(e), nk.typeBits(e), rid, writeOpts{})
		}); err != nil {
		return false, err
	}
	return nk.multikey, nil
}

// diffKeys walks two sorted key lists, calling removed for keys only in a and added for keys
// only in b. Equal KeyStrings whose TypeBits differ (1 → 1.0) are rewritten, so covered reads
// return the new type.
func diffKeys(a, b *keys, removed, added func(encodedKey) error) error {
	i, j := 0, 0
	for i < len(a.list) || j < len(b.list) {
		var c int
		switch {
		case i == len(a.list):
			c = 1
		case j == len(b.list):
			c = -1
		default:
			c = bytes.Compare(a.prefix(a.list[i]), b.prefix(b.list[j]))
		}
		switch {
		case c < 0:
			if err := removed(a.list[i]); err != nil {
				return err
			}
			i++
		case c > 0:
			if err := added(b.list[j]); err != nil {
				return err
			}
			j++
		default:
			if !bytes.Equal(a.typeBits(a.list[i]), b.typeBits(b.list[j])) {
				if err := added(b.list[j]); err != nil {
					return err
				}
			}
			i++
			j++
		}
	}
	return nil
}

// dupKeyError builds MongoDB's DuplicateKey error for the KeyString prefix.
func (ix *Index) dupKeyError(prefix, tb []byte) error {
	vals, err := keystring.Decode(prefix, ix.ord, tb)
	if err != nil {
		return err
	}
	return DuplicateKeyError(ix.ns, ix.name, ix.keyPattern, ix.fieldNames, vals)
}

// DuplicateKeyError returns E11000 with MongoDB's message and keyPattern/keyValue info:
//
//	E11000 duplicate key error collection: db.c index: a_1 dup key: { a: 1 }
func DuplicateKeyError(ns, indexName string, keyPattern bsoncore.Document, fields []string, vals []bsoncore.Value) error {
	keyValue := keystring.ToBSONKeyNamed(fields, vals)
	msg := "E11000 duplicate key error collection: " + ns + " index: " + indexName + " dup key: " + FormatDoc(keyValue)
	info := bsoncore.NewDocumentBuilder().
		AppendDocument("keyPattern", keyPattern).
		AppendDocument("keyValue", keyValue).
		Build()
	return mongoerr.New(mongoerr.DuplicateKey, msg).WithInfo(info)
}
