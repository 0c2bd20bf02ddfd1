// Package validate implements collection validation (execution spec: "Collection
// Validation"; checklist-execution.md section 15): it checks that every record is valid BSON,
// that every ready index holds exactly the keys its records generate, that unique indexes
// hold no duplicates, that multikey metadata covers the documents, that the in-memory catalog
// matches the durable one, and that the fast count matches the record store.
//
// The algorithm is the spec's two-phase one. Phase one hashes every index entry a record
// should have (+1) and every entry the index table has (-1) into per-index buckets; if all
// buckets are zero the collection is consistent. Otherwise phase two re-reads, through the
// same storage snapshot, only the entries that hash to non-zero buckets and reports exactly
// which are missing and which are extra.
//
// This is foreground validation: the caller holds the collection exclusively (MODE_X), reads
// are untimestamped, and with full the fast count is corrected. Background validation and
// repair mode are not implemented.
package validate

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// MaxNestingDepth is the deepest document nesting validate accepts (MongoDB's
// BSONDepth::getMaxAllowableDepth default, which validateBSON enforces).
const MaxNestingDepth = 200

// numBuckets is the number of hash buckets per index in phase one.
const numBuckets = 1 << 12

// maxReported bounds the missing/extra entries listed in a result.
const maxReported = 1000

// Options tune ValidateWithOptions.
type Options struct {
	// Full runs the expensive checks (BSON conformance: duplicate field names, invalid UTF-8)
	// and corrects a wrong fast count.
	Full bool
	// Logger receives details of every inconsistency (default slog.Default()).
	Logger *slog.Logger
}

// IndexDetail is one entry of indexDetails.
type IndexDetail struct {
	Valid    bool
	Warnings []string
	Errors   []string
}

// IndexEntry is one element of missingIndexEntries / extraIndexEntries.
type IndexEntry struct {
	IndexName string
	RecordID  recordid.ID
	// IndexKey is the key as a document named by the key pattern's fields.
	IndexKey bsoncore.Document
	// IDKey is {_id: ...} of the record (missing entries only; nil when unknown).
	IDKey bsoncore.Document
}

// Result carries the fields of MongoDB's validate reply.
type Result struct {
	NS                     string
	UUID                   catalog.UUID
	NInvalidDocuments      int64
	NNonCompliantDocuments int64
	NRecords               int64
	NIndexes               int
	KeysPerIndex           map[string]int64
	IndexDetails           map[string]*IndexDetail
	Valid                  bool
	Repaired               bool
	Warnings               []string
	Errors                 []string
	ExtraIndexEntries      []IndexEntry
	MissingIndexEntries    []IndexEntry
	CorruptRecords         []recordid.ID

	// order lists validated index names in catalog order (for ToBSON).
	order []string
}

// Validate validates collection ns in the foreground. See ValidateWithOptions.
func Validate(ctx context.Context, e *storage.Engine, cat *catalog.Catalog, ns string, full bool) (*Result, error) {
	return ValidateWithOptions(ctx, e, cat, ns, Options{Full: full})
}

// idxState is the per-index validation state.
type idxState struct {
	meta    *catalog.IndexMeta
	gen     *index.KeyGenerator
	ord     keystring.Ordering
	isID    bool
	unique  bool
	names   []string
	skip    bool // key consistency not checked (warning already given)
	buckets []int32
	keys    int64
	detail  *IndexDetail
	// Phase two: exact entries hashing to non-zero buckets, by identity.
	fromRecords map[string]IndexEntry
	fromIndex   map[string]IndexEntry
	// multikeyReported limits multikey errors to one per index.
	multikeyReported bool
}

func (s *idxState) fail(msg string) {
	s.detail.Valid = false
	s.detail.Errors = append(s.detail.Errors, msg)
}

// validator holds one validation run.
type validator struct {
	ctx  context.Context
	e    *storage.Engine
	ru   *storage.RecoveryUnit
	meta *catalog.CollectionMeta
	opts Options
	log  *slog.Logger
	seed maphash.Seed
	res  *Result
	idx  []*idxState

	// reusable buffers
	ks   index.KeySet
	kb   keystring.Builder
	ents [][]byte // identities of one document's keys (slices of entBuf)
	pfx  [][]byte // matching KeyString prefixes
	tbs  [][]byte
	buf  []byte
}

// ValidateWithOptions validates collection ns. Inconsistencies are reported in the Result
// (Valid false); the error is for failures to validate at all (missing collection,
// storage errors, cancellation).
func ValidateWithOptions(ctx context.Context, e *storage.Engine, cat *catalog.Catalog, ns string, opts Options) (*Result, error) {
	meta, ok := cat.Latest().ByNS(ns)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection '%s' does not exist to validate.", ns)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	v := &validator{
		ctx: ctx, e: e, meta: meta, opts: opts,
		log:  opts.Logger.With("c", "STORAGE", "ns", ns),
		seed: maphash.MakeSeed(),
		res: &Result{
			NS: ns, UUID: meta.UUID, Valid: true,
			KeysPerIndex: map[string]int64{}, IndexDetails: map[string]*IndexDetail{},
			Warnings: []string{}, Errors: []string{},
		},
	}
	// One snapshot for every phase: the caller excludes writers, and both phases must see
	// the same data for the bucket counts to mean anything.
	v.ru = e.NewRecoveryUnit()
	defer v.ru.Close()
	// Foreground validation reads the data as it was before any prepared transaction wrote
	// it, as mongod's does (kIgnoreConflictsAllowWrites): it checks the structures, and a
	// prepared transaction must not make it wait or fail.
	if err := v.ru.SetPrepareConflictBehavior(storage.PrepareConflictIgnore); err != nil {
		return nil, err
	}
	if err := v.ru.PreallocateSnapshot(); err != nil {
		return nil, err
	}
	if err := v.checkCatalog(cat); err != nil {
		return nil, err
	}
	if err := v.setupIndexes(); err != nil {
		return nil, err
	}
	dataSize, err := v.scanRecords(false)
	if err != nil {
		return nil, err
	}
	for _, s := range v.idx {
		if err := v.scanIndex(s, false); err != nil {
			return nil, err
		}
	}
	if v.inconsistent() {
		// Phase two: pinpoint the entries in the non-zero buckets.
		for _, s := range v.idx {
			s.fromRecords, s.fromIndex = map[string]IndexEntry{}, map[string]IndexEntry{}
		}
		if _, err := v.scanRecords(true); err != nil {
			return nil, err
		}
		for _, s := range v.idx {
			if err := v.scanIndex(s, true); err != nil {
				return nil, err
			}
		}
		v.report()
	}
	v.checkCounts(dataSize)
	v.finish()
	return v.res, nil
}

// checkCatalog compares the in-memory metadata with the durable catalog entry.
func (v *validator) checkCatalog(cat *catalog.Catalog) error {
	durable, err := cat.At(v.ru)
	if err != nil {
		return err
	}
	d, ok := durable.ByUUID(v.meta.UUID)
	if !ok {
		v.addError(fmt.Sprintf("Collection %s (UUID %s) has no durable catalog entry", v.meta.NS, v.meta.UUID))
		return nil
	}
	mismatch := d.NS != v.meta.NS || d.Ident != v.meta.Ident || len(d.Indexes) != len(v.meta.Indexes)
	if !mismatch {
		for i := range d.Indexes {
			a, b := &d.Indexes[i], &v.meta.Indexes[i]
			if a.Name != b.Name || a.Ident != b.Ident || a.Ready != b.Ready || !bytes.Equal(a.Spec, b.Spec) {
				mismatch = true
			}
		}
	}
	if mismatch {
		v.addError(fmt.Sprintf("In-memory catalog entry for %s does not match the durable catalog", v.meta.NS))
	}
	return nil
}

func (v *validator) setupIndexes() error {
	for i := range v.meta.Indexes {
		m := &v.meta.Indexes[i]
		if !m.Ready {
			v.res.Warnings = append(v.res.Warnings, fmt.Sprintf(
				"Could not complete validation of index %s: the index build is in progress", m.Name))
			continue
		}
		s := &idxState{meta: m, isID: m.IsIDIndex(), unique: m.Unique || m.IsIDIndex(),
			detail: &IndexDetail{Valid: true}, buckets: make([]int32, numBuckets)}
		v.res.IndexDetails[m.Name] = s.detail
		v.res.order = append(v.res.order, m.Name)
		var filter index.Filter
		if m.PartialFilterExpression != nil {
			f, err := query.ParsePartialFilter(m.PartialFilterExpression)
			if err != nil {
				return fmt.Errorf("validate: index %s: %w", m.Name, err)
			}
			filter = f
		}
		gen, err := index.NewKeyGenerator(m.KeyPattern, index.KeyGenOptions{Sparse: m.Sparse, Filter: filter})
		if err != nil {
			s.fail(fmt.Sprintf("Index %s has an invalid key pattern: %v", m.Name, err))
			s.skip = true
		} else {
			s.gen = gen
			s.ord = keystring.Ordering(gen.DescendingMask())
			s.names = gen.Paths()
		}
		v.idx = append(v.idx, s)
	}
	v.res.NIndexes = len(v.idx)
	return nil
}

func (s *idxState) bucket(v *validator, identity []byte) *int32 {
	return &s.buckets[maphash.Bytes(v.seed, identity)%numBuckets]
}

// scanRecords walks the record store. In phase one it checks every record and adds its
// index entries to the buckets; in phase two (exact) it records the entries that fall in
// non-zero buckets. It returns the data size.
func (v *validator) scanRecords(exact bool) (int64, error) {
	rs, err := storage.OpenRecordStore(v.e, v.meta.Ident)
	if err != nil {
		return 0, err
	}
	cur, err := rs.NewCursor(v.ru, false)
	if err != nil {
		return 0, err
	}
	defer cur.Close()
	var dataSize int64
	var prev recordid.ID
	n := 0
	for {
		rid, doc, ok := cur.Next()
		if !ok {
			break
		}
		if n++; n%1024 == 0 {
			if err := v.ctx.Err(); err != nil {
				return 0, err
			}
		}
		if !exact {
			if !prev.IsNull() && recordid.Compare(prev, rid) >= 0 {
				v.addError(fmt.Sprintf("RecordId %v is not greater than the previous RecordId %v", rid, prev))
			}
			prev = rid
			v.res.NRecords++
			dataSize += int64(len(doc))
			if bad, msg := checkBSON(doc, v.opts.Full); bad == invalidBSON {
				v.res.NInvalidDocuments++
				v.res.CorruptRecords = append(v.res.CorruptRecords, rid)
				v.log.Error("invalid document", "recordId", rid.String(), "reason", msg)
				continue
			} else if bad == nonCompliant {
				v.res.NNonCompliantDocuments++
				v.log.Warn("document not conformant to the BSON specification", "recordId", rid.String(), "reason", msg)
			}
		} else if bad, _ := checkBSON(doc, false); bad == invalidBSON {
			continue
		}
		for _, s := range v.idx {
			if s.skip {
				continue
			}
			if err := v.recordKeys(s, doc, rid, exact); err != nil {
				return 0, err
			}
		}
	}
	return dataSize, cur.Err()
}

// recordKeys generates doc's entries for index s (deduplicated by KeyString, as the index
// writes them) and accounts for them.
func (v *validator) recordKeys(s *idxState, doc bsoncore.Document, rid recordid.ID, exact bool) error {
	if err := s.gen.GetKeys(doc, &v.ks); err != nil {
		if !exact {
			s.fail(fmt.Sprintf("Index %s: key generation failed for the document with %v: %v", s.meta.Name, rid, err))
		}
		return nil
	}
	v.buf, v.ents, v.pfx, v.tbs = v.buf[:0], v.ents[:0], v.pfx[:0], v.tbs[:0]
	type span struct{ off, plen, ilen, tlen int }
	var spans [8]span
	sp := spans[:0]
	for i := 0; i < v.ks.Len(); i++ {
		v.kb.Reset(s.ord)
		for _, val := range v.ks.Key(i) {
			v.kb.AppendValue(val)
		}
		prefix := v.kb.Bytes()
		if err := v.kb.Err(); err != nil {
			if !exact {
				s.fail(fmt.Sprintf("Index %s: cannot encode a key of the document with %v: %v", s.meta.Name, rid, err))
			}
			return nil
		}
		off := len(v.buf)
		v.buf = append(v.buf, prefix...)
		plen := len(prefix)
		// Identity: what makes an entry unique in the index table. Secondary indexes store
		// KeyString+RecordId as the key; the _id index stores the KeyString and the
		// RecordId in the value.
		if s.isID {
			v.buf = rid.AppendKey(v.buf)
		} else {
			v.kb.AppendRecordID(rid)
			v.buf = append(v.buf, v.kb.Bytes()[plen:]...)
		}
		ilen := len(v.buf) - off
		tb := v.kb.TypeBits()
		v.buf = append(v.buf, tb...)
		sp = append(sp, span{off, plen, ilen, len(tb)})
	}
	for _, x := range sp {
		v.ents = append(v.ents, v.buf[x.off:x.off+x.ilen])
		v.pfx = append(v.pfx, v.buf[x.off:x.off+x.plen])
		v.tbs = append(v.tbs, v.buf[x.off+x.ilen:x.off+x.ilen+x.tlen])
	}
	// KeyStringSet semantics: equal KeyStrings (1 and 1.0) are one entry.
	order := make([]int, len(v.ents))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(v.pfx[a], v.pfx[b]) })
	distinct := 0
	for j, i := range order {
		if j > 0 && bytes.Equal(v.pfx[i], v.pfx[order[j-1]]) {
			continue
		}
		distinct++
		b := s.bucket(v, v.ents[i])
		if !exact {
			*b++
			continue
		}
		if *b != 0 && len(s.fromRecords) < maxReported {
			var idKey bsoncore.Document
			if idv, ok, err := index.IDValue(doc); err == nil && ok {
				idKey = bsoncore.NewDocumentBuilder().AppendValue("_id", idv).Build()
			}
			s.fromRecords[string(v.ents[i])] = IndexEntry{IndexName: s.meta.Name, RecordID: rid,
				IndexKey: v.keyDoc(s, v.pfx[i], v.tbs[i]), IDKey: idKey}
		}
	}
	if exact {
		return nil
	}
	// Multikey metadata must cover the document.
	if (distinct > 1 || v.ks.HasMultikeyPaths()) && !s.multikeyReported {
		if !s.meta.Multikey {
			s.multikeyReported = true
			s.fail(fmt.Sprintf("Index with name: %s is not multi-key but has more than one key in document with %v",
				s.meta.Name, rid))
		} else if s.meta.MultikeyPaths != nil {
			for f := 0; f < s.gen.NumFields(); f++ {
				mask := v.ks.MultikeyComponents(f)
				for c := 0; mask != 0 && c < 64; c++ {
					if mask&(1<<c) == 0 {
						continue
					}
					if f >= len(s.meta.MultikeyPaths) || c >= len(s.meta.MultikeyPaths[f]) || !s.meta.MultikeyPaths[f][c] {
						if !s.multikeyReported {
							s.multikeyReported = true
							s.fail(fmt.Sprintf("Index with name: %s multikey paths do not cover a document. RecordId: %v",
								s.meta.Name, rid))
						}
					}
				}
			}
		}
	}
	return nil
}

// keyDoc renders a KeyString prefix as {field: value, ...}.
func (v *validator) keyDoc(s *idxState, prefix, tb []byte) bsoncore.Document {
	vals, err := keystring.Decode(prefix, s.ord, tb)
	if err != nil {
		return bsoncore.NewDocumentBuilder().AppendString("undecodable", fmt.Sprintf("%x", prefix)).Build()
	}
	return keystring.ToBSONKeyNamed(s.names, vals)
}

// scanIndex walks index s's table: order, uniqueness, key counts, and its side of the
// buckets (phase one) or the exact entries in non-zero buckets (phase two).
func (v *validator) scanIndex(s *idxState, exact bool) error {
	cur, err := v.ru.NewCursor(s.meta.Ident, storage.CursorOptions{})
	if err != nil {
		return err
	}
	defer cur.Close()
	var prevKey, prevPrefix, ident []byte
	n := 0
	for ok := cur.First(); ok; ok = cur.Next() {
		if n++; n%1024 == 0 {
			if err := v.ctx.Err(); err != nil {
				return err
			}
		}
		key, val := cur.Key(), cur.Value()
		var rid recordid.ID
		var prefix, tb []byte
		corrupt := ""
		if s.isID {
			prefix = key
			r, t, err := decodeIDValue(val)
			if err != nil {
				corrupt = err.Error()
			}
			rid, tb = r, t
			ident = rid.AppendKey(append(ident[:0], key...))
		} else {
			r, plen, err := keystring.DecodeRecordIDAtEnd(key)
			if err != nil {
				corrupt = err.Error()
				plen = len(key)
			}
			rid, prefix, tb = r, key[:plen], val
			ident = append(ident[:0], key...)
		}
		if !exact {
			s.keys++
			if corrupt != "" {
				s.fail(fmt.Sprintf("Index %s has a corrupt entry: %s", s.meta.Name, corrupt))
			}
			if prevKey != nil && bytes.Compare(prevKey, key) >= 0 {
				s.fail(fmt.Sprintf("index '%s' is not in strictly ascending or descending order", s.meta.Name))
			}
			if s.unique && !s.isID && prevPrefix != nil && bytes.Equal(prevPrefix, prefix) {
				s.fail(fmt.Sprintf("Unique index %s has duplicate key: %s", s.meta.Name,
					index.FormatDoc(v.keyDoc(s, prefix, tb))))
			}
			prevKey = append(prevKey[:0], key...)
			prevPrefix = append(prevPrefix[:0], prefix...)
		}
		if s.skip {
			continue
		}
		b := s.bucket(v, ident)
		if !exact {
			*b--
			continue
		}
		if *b != 0 && len(s.fromIndex) < maxReported {
			s.fromIndex[string(ident)] = IndexEntry{IndexName: s.meta.Name, RecordID: rid, IndexKey: v.keyDoc(s, prefix, tb)}
		}
	}
	return cur.Err()
}

func (v *validator) inconsistent() bool {
	for _, s := range v.idx {
		for _, b := range s.buckets {
			if b != 0 {
				return true
			}
		}
	}
	return false
}

// report turns phase two's exact entries into missing and extra index entries.
func (v *validator) report() {
	for _, s := range v.idx {
		var missing, extra int
		for id, ent := range s.fromRecords {
			if _, ok := s.fromIndex[id]; !ok {
				missing++
				v.res.MissingIndexEntries = append(v.res.MissingIndexEntries, ent)
			}
		}
		for id, ent := range s.fromIndex {
			if _, ok := s.fromRecords[id]; !ok {
				extra++
				v.res.ExtraIndexEntries = append(v.res.ExtraIndexEntries, ent)
			}
		}
		if missing+extra > 0 {
			s.fail(fmt.Sprintf("Index with name: %s has inconsistencies.", s.meta.Name))
			v.log.Error("index inconsistency", "index", s.meta.Name, "missing", missing, "extra", extra)
		}
	}
	byRID := func(a, b IndexEntry) int {
		if c := recordid.Compare(a.RecordID, b.RecordID); c != 0 {
			return c
		}
		return bytes.Compare(a.IndexKey, b.IndexKey)
	}
	slices.SortFunc(v.res.MissingIndexEntries, byRID)
	slices.SortFunc(v.res.ExtraIndexEntries, byRID)
	if n := len(v.res.MissingIndexEntries); n > 0 {
		v.addError(fmt.Sprintf("Detected %d missing index entries.", n))
	}
	if n := len(v.res.ExtraIndexEntries); n > 0 {
		v.addError(fmt.Sprintf("Detected %d extra index entries.", n))
	}
}

// checkCounts compares the fast count with the scan; full validation corrects it.
func (v *validator) checkCounts(dataSize int64) {
	records, size := v.e.Counts(v.meta.Ident)
	if records == v.res.NRecords && size == dataSize {
		return
	}
	msg := fmt.Sprintf("The collection's fast count (records: %d, dataSize: %d) does not match the record store (records: %d, dataSize: %d)",
		records, size, v.res.NRecords, dataSize)
	if v.opts.Full {
		v.e.SetCounts(v.meta.Ident, v.res.NRecords, dataSize)
		msg += "; corrected"
	}
	v.res.Warnings = append(v.res.Warnings, msg)
}

func (v *validator) finish() {
	if v.res.NInvalidDocuments > 0 {
		v.addError("Detected one or more invalid documents. See logs.")
	}
	if v.res.NNonCompliantDocuments > 0 {
		v.res.Warnings = append(v.res.Warnings,
			"Detected one or more documents in this collection not conformant to BSON specifications. See logs.")
	}
	for _, s := range v.idx {
		v.res.KeysPerIndex[s.meta.Name] = s.keys
		if !s.detail.Valid {
			v.res.Valid = false
			for _, e := range s.detail.Errors {
				if !slices.Contains(v.res.Errors, e) {
					v.res.Errors = append(v.res.Errors, e)
				}
			}
		}
	}
	if len(v.res.Errors) > 0 {
		v.res.Valid = false
	}
}

func (v *validator) addError(msg string) {
	v.res.Valid = false
	v.res.Errors = append(v.res.Errors, msg)
}

// decodeIDValue reads the _id index value: uvarint(len(rid key)) rid key TypeBits (the
// format documented on index.Index).
func decodeIDValue(val []byte) (recordid.ID, []byte, error) {
	n, w := binary.Uvarint(val)
	if w <= 0 || uint64(len(val)-w) < n {
		return recordid.ID{}, nil, fmt.Errorf("corrupt _id index value %x", val)
	}
	rid, err := recordid.FromKey(val[w : w+int(n)])
	if err != nil {
		return recordid.ID{}, nil, err
	}
	return rid, val[w+int(n):], nil
}

type bsonStatus int

const (
	validBSON bsonStatus = iota
	nonCompliant
	invalidBSON
)

// checkBSON checks doc's structure and nesting depth and, with full, BSON conformance
// (duplicate field names, invalid UTF-8 in field names and strings).
func checkBSON(doc []byte, full bool) (bsonStatus, string) {
	if err := bsoncore.Document(doc).Validate(); err != nil {
		return invalidBSON, err.Error()
	}
	st := validBSON
	msg := ""
	if err := walk(doc, 1, full, &st, &msg); err != nil {
		return invalidBSON, err.Error()
	}
	return st, msg
}

func walk(d []byte, depth int, full bool, st *bsonStatus, msg *string) error {
	if depth > MaxNestingDepth {
		return fmt.Errorf("document nesting deeper than %d", MaxNestingDepth)
	}
	length, _, ok := bsoncore.ReadLength(d)
	if !ok || length < 5 || int(length) > len(d) || d[length-1] != 0 {
		return fmt.Errorf("malformed embedded document")
	}
	rem := d[4 : length-1]
	var seen [][]byte
	for len(rem) > 0 {
		elem, r, ok := bsoncore.ReadElement(rem)
		if !ok {
			return fmt.Errorf("malformed element")
		}
		rem = r
		key, err := elem.KeyBytesErr()
		if err != nil {
			return err
		}
		val, err := elem.ValueErr()
		if err != nil {
			return err
		}
		if full && *st == validBSON {
			if !utf8.Valid(key) {
				*st, *msg = nonCompliant, "invalid UTF-8 in a field name"
			}
			for _, k := range seen {
				if bytes.Equal(k, key) {
					*st, *msg = nonCompliant, fmt.Sprintf("duplicate field name %q", key)
				}
			}
			seen = append(seen, key)
		}
		switch val.Type {
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			if err := walk(val.Data, depth+1, full, st, msg); err != nil {
				return err
			}
		case bsoncore.TypeString:
			if full && *st == validBSON {
				if s, ok := val.StringValueOK(); ok && !utf8.ValidString(s) {
					*st, *msg = nonCompliant, "invalid UTF-8 in a string"
				}
			}
		case bsoncore.TypeCodeWithScope:
			_, scope, ok := val.CodeWithScopeOK()
			if !ok {
				return fmt.Errorf("malformed code with scope")
			}
			if err := walk(scope, depth+1, full, st, msg); err != nil {
				return err
			}
		}
	}
	return nil
}
