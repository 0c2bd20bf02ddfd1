package plan

import (
	"bytes"
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/keystring"
	"humongo/internal/query"
	"humongo/internal/recordid"
)

// scanRange is one contiguous index range, in index key order.
type scanRange struct {
	low, high *index.Bound
}

// ixScan is IXSCAN: it walks its ranges in order (reverse order for a backward scan),
// optionally checks the fields its ranges do not bound against their intervals, drops
// duplicate RecordIds of multikey indexes, and applies a covered filter to the key values.
type ixScan struct {
	cs      commonStats
	env     *execEnv
	ix      *index.Index
	meta    *catalog.IndexMeta
	names   []string
	bounds  []oil // per field, value order
	desc    []bool
	ranges  []scanRange
	reverse bool
	// check[i] is set for fields whose intervals the ranges do not enforce.
	check     []bool
	needVals  bool
	keyFilter *query.Matcher
	rawFilt   bsoncore.Document
	minMax    bool // bounds come from min/max (explain shows them as such)
	dedup     bool
	seen      map[string]struct{}

	ri         int
	c          *index.Cursor
	resume     bool
	lastKS     []byte
	lastTB     []byte
	lastRID    recordid.ID
	keys       int64
	seeks      int64
	dupsTested int64
	dupsDrop   int64
	m          member
	kbuf       []byte
}

func (s *ixScan) openRange() error {
	idx := s.ri
	if s.reverse {
		idx = len(s.ranges) - 1 - s.ri
	}
	r := s.ranges[idx]
	c, err := s.ix.NewCursor(s.env.ru, index.ScanOptions{Low: r.low, High: r.high, Reverse: s.reverse})
	if err != nil {
		return err
	}
	s.c = c
	s.seeks++
	return nil
}

func (s *ixScan) work(ctx context.Context) (*member, workState, error) {
	s.cs.works++
	for {
		if s.c == nil {
			if s.ri >= len(s.ranges) {
				s.cs.eof = true
				return nil, isEOF, nil
			}
			if err := s.openRange(); err != nil {
				return nil, isEOF, err
			}
			if s.resume {
				s.resume = false
				ok, err := s.seekPastLast()
				if err != nil {
					return nil, isEOF, err
				}
				if ok {
					return s.current()
				}
				if err := s.c.Err(); err != nil {
					return nil, isEOF, err
				}
				s.c.Close()
				s.c = nil
				s.ri++
				continue
			}
		}
		if !s.c.Next() {
			if err := s.c.Err(); err != nil {
				return nil, isEOF, err
			}
			s.c.Close()
			s.c = nil
			s.ri++
			// Moving to the next range costs a work, as a seek does in MongoDB.
			return s.cs.noResult()
		}
		return s.current()
	}
}

// seekPastLast positions after the last entry returned before a save: it seeks to that exact
// entry and steps over it if it still exists.
func (s *ixScan) seekPastLast() (bool, error) {
	vals, err := keystring.Decode(s.lastKS, s.ix.Ordering(), s.lastTB)
	if err != nil {
		return false, err
	}
	rid := s.lastRID
	if s.ix.IsID() {
		rid = recordid.ID{}
	}
	key, _ := keystring.Encode(vals, s.ix.Ordering(), rid)
	if !s.c.Seek(key) {
		return false, nil
	}
	if bytes.Equal(s.c.KeyString(), s.lastKS) && recordid.Compare(s.c.RecordID(), s.lastRID) == 0 {
		return s.c.Next(), nil
	}
	return true, nil
}

// current examines the entry under the cursor.
func (s *ixScan) current() (*member, workState, error) {
	s.keys++
	s.env.keys++
	s.lastKS = append(s.lastKS[:0], s.c.KeyString()...)
	s.lastTB = append(s.lastTB[:0], s.c.TypeBits()...)
	s.lastRID = s.c.RecordID()
	s.m = member{rid: s.c.RecordID(), keyNames: s.names}
	if s.needVals {
		vals, err := s.c.Key()
		if err != nil {
			return nil, isEOF, err
		}
		for i, v := range vals {
			if i < len(s.check) && s.check[i] && !s.bounds[i].contains(v) {
				return s.cs.noResult()
			}
		}
		s.m.keyVals = vals
		if s.keyFilter != nil {
			s.kbuf = appendKeyDoc(s.kbuf[:0], s.names, vals)
			ok, err := s.keyFilter.Matches(s.kbuf)
			if err != nil {
				return nil, isEOF, err
			}
			if !ok {
				return s.cs.noResult()
			}
		}
	}
	if s.dedup {
		s.dupsTested++
		k := string(s.m.rid.AppendKey(nil))
		if _, dup := s.seen[k]; dup {
			s.dupsDrop++
			return s.cs.noResult()
		}
		if s.seen == nil {
			s.seen = map[string]struct{}{}
		}
		s.seen[k] = struct{}{}
	}
	return s.cs.advance(&s.m)
}

func (s *ixScan) save() {
	s.cs.saveState++
	if s.c != nil {
		// Reopen and seek on restore: the range's cursor is rebuilt from the last key.
		s.c.Close()
		s.c = nil
		s.resume = s.keys > 0
		if !s.resume {
			return
		}
	}
}

func (s *ixScan) restore(env *execEnv) error {
	s.cs.restoreState++
	s.env = env
	return nil
}

func (s *ixScan) close() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}
func (s *ixScan) common() *commonStats { return &s.cs }
func (s *ixScan) children() []stage    { return nil }

func (s *ixScan) describe(b []byte) []byte {
	b = bsoncore.AppendStringElement(b, "stage", "IXSCAN")
	if s.keyFilter != nil {
		b = bsoncore.AppendDocumentElement(b, "filter", s.rawFilt)
	}
	b = bsoncore.AppendDocumentElement(b, "keyPattern", s.meta.KeyPattern)
	b = bsoncore.AppendStringElement(b, "indexName", s.meta.Name)
	b = bsoncore.AppendBooleanElement(b, "isMultiKey", s.meta.Multikey)
	idx, bb := bsoncore.AppendDocumentElementStart(b, "multiKeyPaths")
	for i, n := range s.names {
		ai, bbb := bsoncore.AppendArrayElementStart(bb, n)
		k := 0
		if i < len(s.meta.MultikeyPaths) {
			parts := splitDots(n)
			for j, mk := range s.meta.MultikeyPaths[i] {
				if mk && j < len(parts) {
					bbb = bsoncore.AppendStringElement(bbb, itoa(k), joinDots(parts[:j+1]))
					k++
				}
			}
		}
		bb, _ = bsoncore.AppendArrayEnd(bbb, ai)
	}
	b, _ = bsoncore.AppendDocumentEnd(bb, idx)
	b = bsoncore.AppendBooleanElement(b, "isUnique", s.meta.Unique || s.meta.IsIDIndex())
	b = bsoncore.AppendBooleanElement(b, "isSparse", s.meta.Sparse)
	b = bsoncore.AppendBooleanElement(b, "isPartial", s.meta.PartialFilterExpression != nil)
	b = bsoncore.AppendInt32Element(b, "indexVersion", max(s.meta.Version, 1))
	dir := "forward"
	if s.reverse {
		dir = "backward"
	}
	b = bsoncore.AppendStringElement(b, "direction", dir)
	idx, bb = bsoncore.AppendDocumentElementStart(b, "indexBounds")
	if s.minMax {
		b, _ = bsoncore.AppendDocumentEnd(bb, idx)
		return b
	}
	for i, n := range s.names {
		// Bounds are listed in scan order: reversed for descending fields, and again for a
		// backward scan.
		rev := s.desc[i] != s.reverse
		bb = appendStrings(bb, n, formatOIL(s.bounds[i], rev))
	}
	b, _ = bsoncore.AppendDocumentEnd(bb, idx)
	return b
}

func (s *ixScan) stats(b []byte) []byte {
	b = bsoncore.AppendInt64Element(b, "keysExamined", s.keys)
	b = bsoncore.AppendInt64Element(b, "seeks", s.seeks)
	b = bsoncore.AppendInt64Element(b, "dupsTested", s.dupsTested)
	return bsoncore.AppendInt64Element(b, "dupsDropped", s.dupsDrop)
}

func appendStrings(b []byte, key string, ss []string) []byte {
	idx, b := bsoncore.AppendArrayElementStart(b, key)
	for i, s := range ss {
		b = bsoncore.AppendStringElement(b, itoa(i), s)
	}
	b, _ = bsoncore.AppendArrayEnd(b, idx)
	return b
}
