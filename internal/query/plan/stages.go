package plan

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/collation"
	"humongo/internal/index"
	"humongo/internal/index/sorter"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// workState is the outcome of one unit of work (PlanStage::StageState).
type workState int

const (
	advanced workState = iota
	needTime
	isEOF
)

// member is a working-set member: a record id with its document and/or index key. doc and the
// key slices may alias storage buffers valid only until the producing stage works again;
// stages that buffer (SORT) copy them.
type member struct {
	rid recordid.ID
	doc bsoncore.Document
	// keyVals are the decoded index key values (covered plans, returnKey); keyNames their
	// index fields.
	keyVals  []bsoncore.Value
	keyNames []string
	// details carries the match's elemMatchKey for positional projections.
	details query.MatchDetails
}

// commonStats are every stage's counters (CommonStats in MongoDB's explain).
type commonStats struct {
	works, advanced, needTime, saveState, restoreState int64
	eof                                                bool
	elapsed                                            time.Duration
}

// stage is one node of a plan tree.
type stage interface {
	work(ctx context.Context) (*member, workState, error)
	save()
	restore(env *execEnv) error
	close()
	common() *commonStats
	children() []stage
	// describe appends the plan-shape fields (stage, indexName, bounds...), without stats or
	// inputStage; stats appends the stage-specific execution counters.
	describe(b []byte) []byte
	stats(b []byte) []byte
}

// passOn records a child's work that did not advance (EOF or needTime) and returns it as
// the parent's own.
func (cs *commonStats) passOn(st workState, err error) (*member, workState, error) {
	if st == isEOF {
		cs.eof = true
	} else {
		cs.needTime++
	}
	return nil, st, err
}

// advance counts an advanced work returning m.
func (cs *commonStats) advance(m *member) (*member, workState, error) {
	cs.advanced++
	return m, advanced, nil
}

// noResult counts a work that produced nothing this time (needTime): the caller works again.
func (cs *commonStats) noResult() (*member, workState, error) {
	cs.needTime++
	return nil, needTime, nil
}

// oneChild is the part of a stage over one child that passes the state changes down.
type oneChild struct {
	cs    commonStats
	child stage
}

func (s *oneChild) save()                      { s.cs.saveState++; s.child.save() }
func (s *oneChild) restore(env *execEnv) error { s.cs.restoreState++; return s.child.restore(env) }
func (s *oneChild) close()                     { s.child.close() }
func (s *oneChild) common() *commonStats       { return &s.cs }
func (s *oneChild) children() []stage          { return []stage{s.child} }

// execEnv is what stages share: the RecoveryUnit, the collection and the running totals.
type execEnv struct {
	ru    *storage.RecoveryUnit
	coll  *index.Collection
	rs    *storage.RecordStore
	keys  int64 // totalKeysExamined
	docs  int64 // totalDocsExamined
	dedup bool
}

// ---- EOF ----

type eofStage struct{ cs commonStats }

func (s *eofStage) work(context.Context) (*member, workState, error) {
	s.cs.works++
	s.cs.eof = true
	return nil, isEOF, nil
}
func (s *eofStage) save()                  { s.cs.saveState++ }
func (s *eofStage) restore(*execEnv) error { s.cs.restoreState++; return nil }
func (s *eofStage) close()                 {}
func (s *eofStage) common() *commonStats   { return &s.cs }
func (s *eofStage) children() []stage      { return nil }
func (s *eofStage) describe(b []byte) []byte {
	return bsoncore.AppendStringElement(b, "stage", "EOF")
}
func (s *eofStage) stats(b []byte) []byte { return b }

// ---- COLLSCAN ----

type collScan struct {
	cs       commonStats
	env      *execEnv
	reverse  bool
	filter   *query.Matcher
	rawFilt  bsoncore.Document
	tailable bool
	c        *storage.RecordCursor
	docs     int64
	m        member
	lastRID  recordid.ID
	hasLast  bool
}

func (s *collScan) work(ctx context.Context) (*member, workState, error) {
	s.cs.works++
	if s.c == nil {
		c, err := s.env.rs.NewCursor(s.env.ru, s.reverse)
		if err != nil {
			return nil, isEOF, err
		}
		s.c = c
		if s.hasLast {
			// A tailable scan resuming after EOF: continue after the last record returned.
			rid, doc, ok := c.SeekID(s.lastRID)
			if !ok {
				if err := c.Err(); storage.IsPrepareConflict(err) {
					// Reopen and seek again after the wait: a redone seek would land on
					// the last record returned without this check.
					c.Close()
					s.c = nil
					return nil, isEOF, err
				}
				return s.atEnd()
			}
			if recordid.Compare(rid, s.lastRID) != 0 {
				return s.emit(rid, doc)
			}
		}
	}
	rid, doc, ok := s.c.Next()
	if !ok {
		return s.atEnd()
	}
	s.m.details.Interrupt = ctx
	return s.emit(rid, doc)
}

func (s *collScan) atEnd() (*member, workState, error) {
	if err := s.c.Err(); err != nil {
		return nil, isEOF, err
	}
	if s.tailable {
		// Stay open: the next getMore reopens the scan after the last record.
		s.c.Close()
		s.c = nil
	}
	s.cs.eof = true
	return nil, isEOF, nil
}

func (s *collScan) emit(rid recordid.ID, doc []byte) (*member, workState, error) {
	s.cs.eof = false
	s.docs++
	s.env.docs++
	s.lastRID, s.hasLast = rid, true
	s.m = member{rid: rid, doc: doc}
	if s.filter != nil {
		m, err := s.filter.MatchesWithDetails(doc, &s.m.details)
		if err != nil {
			return nil, isEOF, err
		}
		if !m {
			return s.cs.noResult()
		}
	}
	return s.cs.advance(&s.m)
}

func (s *collScan) save() {
	s.cs.saveState++
	if s.c != nil {
		s.c.Save()
	}
}
func (s *collScan) restore(env *execEnv) error {
	s.cs.restoreState++
	s.env = env
	if s.c != nil {
		// A prepare conflict met while repositioning stays on the cursor and surfaces at the
		// next work, where the executor waits for it (Restore has no context to wait with);
		// the cursor then redoes the repositioning.
		if _, err := s.c.Restore(); err != nil && !storage.IsPrepareConflict(err) {
			return err
		}
	}
	return nil
}
func (s *collScan) close() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}
func (s *collScan) common() *commonStats { return &s.cs }
func (s *collScan) children() []stage    { return nil }
func (s *collScan) describe(b []byte) []byte {
	b = bsoncore.AppendStringElement(b, "stage", "COLLSCAN")
	if len(s.rawFilt) > 5 {
		b = bsoncore.AppendDocumentElement(b, "filter", s.rawFilt)
	}
	dir := "forward"
	if s.reverse {
		dir = "backward"
	}
	return bsoncore.AppendStringElement(b, "direction", dir)
}
func (s *collScan) stats(b []byte) []byte {
	return bsoncore.AppendInt64Element(b, "docsExamined", s.docs)
}

// ---- IDHACK ----

type idHack struct {
	cs   commonStats
	env  *execEnv
	id   bsoncore.Value
	done bool
	keys int64
	docs int64
	m    member
}

func (s *idHack) work(context.Context) (*member, workState, error) {
	s.cs.works++
	if s.done {
		s.cs.eof = true
		return nil, isEOF, nil
	}
	rid, doc, found, err := s.env.coll.FindByID(s.env.ru, s.id)
	if err != nil {
		// Not done: after a prepare conflict the executor waits and works again.
		return nil, isEOF, err
	}
	s.done = true
	s.keys++
	s.env.keys++
	if !found {
		s.cs.eof = true
		return nil, isEOF, nil
	}
	s.docs++
	s.env.docs++
	s.cs.advanced++
	s.m = member{rid: rid, doc: doc}
	return &s.m, advanced, nil
}
func (s *idHack) save()                      { s.cs.saveState++ }
func (s *idHack) restore(env *execEnv) error { s.cs.restoreState++; s.env = env; return nil }
func (s *idHack) close()                     {}
func (s *idHack) common() *commonStats       { return &s.cs }
func (s *idHack) children() []stage          { return nil }
func (s *idHack) describe(b []byte) []byte {
	return bsoncore.AppendStringElement(b, "stage", "IDHACK")
}
func (s *idHack) stats(b []byte) []byte {
	b = bsoncore.AppendInt64Element(b, "keysExamined", s.keys)
	return bsoncore.AppendInt64Element(b, "docsExamined", s.docs)
}

// ---- FETCH ----

type fetchStage struct {
	oneChild
	env     *execEnv
	filter  *query.Matcher
	rawFilt bsoncore.Document
	docs    int64
	// pending is the child's member whose record read met a prepare conflict: the child has
	// moved past it, so the next work (after the executor waited) fetches it again.
	pending *member
	held    member
}

func (s *fetchStage) work(ctx context.Context) (*member, workState, error) {
	s.cs.works++
	m := s.pending
	s.pending = nil
	if m == nil {
		var st workState
		var err error
		m, st, err = s.child.work(ctx)
		if err != nil || st != advanced {
			return s.cs.passOn(st, err)
		}
	}
	doc, found, err := s.env.rs.Get(s.env.ru, m.rid)
	if err != nil {
		if storage.IsPrepareConflict(err) {
			// The member's key values are private copies and its rid is immutable, so it
			// survives the save and restore around the wait.
			s.held = *m
			s.pending = &s.held
		}
		return nil, isEOF, err
	}
	s.docs++
	s.env.docs++
	if !found {
		// Deleted since the key was read (a yield in between): skip it.
		return s.cs.noResult()
	}
	m.doc = doc
	if s.filter != nil {
		m.details.Interrupt = ctx
		ok, err := s.filter.MatchesWithDetails(doc, &m.details)
		if err != nil {
			return nil, isEOF, err
		}
		if !ok {
			return s.cs.noResult()
		}
	}
	return s.cs.advance(m)
}
func (s *fetchStage) restore(env *execEnv) error {
	s.env = env
	return s.oneChild.restore(env)
}
func (s *fetchStage) describe(b []byte) []byte {
	b = bsoncore.AppendStringElement(b, "stage", "FETCH")
	if len(s.rawFilt) > 5 {
		b = bsoncore.AppendDocumentElement(b, "filter", s.rawFilt)
	}
	return b
}
func (s *fetchStage) stats(b []byte) []byte {
	b = bsoncore.AppendInt64Element(b, "docsExamined", s.docs)
	return bsoncore.AppendInt64Element(b, "alreadyHasObj", 0)
}

// ---- SHARDING_FILTER ----

// shardFilterStage drops the documents its ownership filter says this node does not own
// (MongoDB's ShardFilterStage; explain's chunkSkips counts them).
type shardFilterStage struct {
	oneChild
	owner      OwnershipFilter
	chunkSkips int64
}

func (s *shardFilterStage) work(ctx context.Context) (*member, workState, error) {
	s.cs.works++
	m, st, err := s.child.work(ctx)
	if err != nil || st != advanced {
		return s.cs.passOn(st, err)
	}
	if !s.owner.KeyBelongs(m.doc) {
		s.chunkSkips++
		return s.cs.noResult()
	}
	return s.cs.advance(m)
}
func (s *shardFilterStage) describe(b []byte) []byte {
	return bsoncore.AppendStringElement(b, "stage", "SHARDING_FILTER")
}
func (s *shardFilterStage) stats(b []byte) []byte {
	return bsoncore.AppendInt64Element(b, "chunkSkips", s.chunkSkips)
}

// appendKeyDoc builds {name: value, ...} from index key values (top-level names only: plans
// are covered only over non-dotted fields).
func appendKeyDoc(dst []byte, names []string, vals []bsoncore.Value) []byte {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	for i, v := range vals {
		if i < len(names) {
			dst = bsoncore.AppendValueElement(dst, names[i], v)
		}
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// ---- SKIP / LIMIT ----

type skipStage struct {
	oneChild
	n    int64
	left int64
}

func (s *skipStage) work(ctx context.Context) (*member, workState, error) {
	s.cs.works++
	m, st, err := s.child.work(ctx)
	if err != nil || st != advanced {
		return s.cs.passOn(st, err)
	}
	if s.left > 0 {
		s.left--
		return s.cs.noResult()
	}
	return s.cs.advance(m)
}
func (s *skipStage) describe(b []byte) []byte {
	b = bsoncore.AppendStringElement(b, "stage", "SKIP")
	return bsoncore.AppendInt64Element(b, "skipAmount", s.n)
}
func (s *skipStage) stats(b []byte) []byte { return b }

type limitStage struct {
	oneChild
	n   int64
	out int64
}

func (s *limitStage) work(ctx context.Context) (*member, workState, error) {
	s.cs.works++
	if s.out >= s.n {
		s.cs.eof = true
		return nil, isEOF, nil
	}
	m, st, err := s.child.work(ctx)
	if err != nil || st != advanced {
		return s.cs.passOn(st, err)
	}
	s.out++
	return s.cs.advance(m)
}
func (s *limitStage) describe(b []byte) []byte {
	b = bsoncore.AppendStringElement(b, "stage", "LIMIT")
	return bsoncore.AppendInt64Element(b, "limitAmount", s.n)
}
func (s *limitStage) stats(b []byte) []byte { return b }

// ---- SORT ----

// sortField is one component of a sort pattern.
type sortField struct {
	path string
	desc bool
	// keyPos is the index key position holding path in covered plans (-1 otherwise).
	keyPos int
}

// sortStage is a blocking sort (SORT_DEFAULT). Keys are the KeyString encoding of the sort
// key values under the sort's ordering followed by an insertion counter, so the external
// sorter's bytes.Compare orders them as MongoDB does and equal keys keep scan order.
type sortStage struct {
	oneChild
	pattern   bsoncore.Document
	fields    []sortField
	ord       keystring.Ordering
	limit     int64 // 0 = none (explain's limitAmount)
	memLimit  int64
	allowDisk bool
	tempDir   string
	srt       *sorter.Sorter // nil while a top-k sort fits its heap
	it        *sorter.Iterator
	loaded    bool // the child is exhausted; emitting
	top       topK
	topPos    int
	kbuf      []byte
	ridBuf    []byte
	seq       uint64
	dataSize  int64
	usedMem   int64
	spills    int
	kb        keystring.Builder
	vals      []bsoncore.Value
	out       member
	keyNames  []string
	covered   bool
	vbuf      []byte
	// coll is the query's collation: strings sort by their collation keys (nil: binary).
	coll *collation.Collator
	ckey []byte
}

func (s *sortStage) work(ctx context.Context) (*member, workState, error) {
	s.cs.works++
	if !s.loaded {
		if s.srt == nil && s.limit <= 0 {
			if err := s.startSorter(); err != nil {
				return nil, isEOF, err
			}
		}
		m, st, err := s.child.work(ctx)
		switch {
		case err != nil:
			return nil, isEOF, err
		case st == needTime:
			return s.cs.noResult()
		case st == advanced:
			if err := s.add(m); err != nil {
				return nil, isEOF, err
			}
			return s.cs.noResult()
		}
		s.loaded = true
		if s.srt == nil {
			// Top-k: everything fit in the bounded heap; emit it in key order.
			s.top.sortAscending()
		} else {
			it, err := s.srt.Done()
			if err != nil {
				return nil, isEOF, err
			}
			s.spills = s.srt.Stats().Spills
			s.it = it
		}
	}
	var v []byte
	if s.it != nil {
		if !s.it.Next() {
			if err := s.it.Err(); err != nil {
				return nil, isEOF, err
			}
			s.cs.eof = true
			return nil, isEOF, nil
		}
		v = s.it.Value()
	} else {
		if s.topPos >= len(s.top.e) {
			s.cs.eof = true
			return nil, isEOF, nil
		}
		v = s.top.e[s.topPos].val
		s.topPos++
	}
	if err := s.decode(v); err != nil {
		return nil, isEOF, err
	}
	return s.cs.advance(&s.out)
}

// startSorter creates the external sorter (no limit, or a top-k heap that outgrew the
// memory limit with allowDiskUse).
func (s *sortStage) startSorter() error {
	mem := s.memLimit
	if !s.allowDisk {
		// Never spill: exceeding the limit is an error, detected in add.
		mem = 1 << 62
	} else if s.tempDir != "" {
		if err := os.MkdirAll(s.tempDir, 0o755); err != nil {
			return err
		}
	}
	s.srt = sorter.New(sorter.Options{MaxMemoryBytes: mem, TempDir: s.tempDir})
	return nil
}

// sortKeyValue computes the sort key component for path in doc: over all values the path
// reaches (arrays expanded), the smallest for ascending and the largest for descending;
// missing is null, and an empty array (nothing reached, but present) is undefined.
func sortKeyValue(doc bsoncore.Document, path string, desc bool, coll *collation.Collator) bsoncore.Value {
	var best bsoncore.Value
	found := false
	_ = bsonutil.ExtractElements(doc, path, true, func(v bsoncore.Value) {
		if !found {
			best, found = v, true
			return
		}
		var c int
		if coll != nil {
			c = bsonutil.CompareWithCollator(v, best, coll)
		} else {
			c = bsonutil.Compare(v, best)
		}
		if (!desc && c < 0) || (desc && c > 0) {
			best = v
		}
	}, nil)
	if found {
		return best
	}
	if v, ok := bsonutil.Lookup(doc, path); ok && v.Type == bsoncore.TypeArray {
		return bsoncore.Value{Type: bsoncore.TypeUndefined}
	}
	return bsoncore.Value{Type: bsoncore.TypeNull}
}

func (s *sortStage) add(m *member) error {
	s.kb.Reset(s.ord)
	for _, f := range s.fields {
		var v bsoncore.Value
		if s.covered {
			v = m.keyVals[f.keyPos]
		} else {
			v = sortKeyValue(m.doc, f.path, f.desc, s.coll)
		}
		v, s.ckey = s.coll.AppendValueKey(s.ckey[:0], v)
		s.kb.AppendValue(v)
	}
	kb := s.kb.Bytes()
	if err := s.kb.Err(); err != nil {
		return err
	}
	key := binary.BigEndian.AppendUint64(append(s.kbuf[:0], kb...), s.seq)
	s.kbuf = key
	s.seq++
	if s.srt == nil && s.top.full(s.limit) && bytes.Compare(key, s.top.e[0].key) >= 0 {
		// Top-k: not among the k smallest so far; costs no copy. (Later documents with an
		// equal sort key lose to earlier ones, as the sequence suffix orders them.)
		s.dataSize += int64(len(key)) + int64(len(m.doc))
		return nil
	}
	// value: uvarint(len(ridKey)) ridKey payload, payload = doc or the key values as an array.
	v := s.vbuf[:0]
	rk := m.rid.AppendKey(s.ridBuf[:0])
	s.ridBuf = rk
	v = binary.AppendUvarint(v, uint64(len(rk)))
	v = append(v, rk...)
	if s.covered {
		idx, vv := bsoncore.AppendArrayStart(v)
		for i, kv := range m.keyVals {
			vv = bsoncore.AppendValueElement(vv, itoa(i), kv)
		}
		v, _ = bsoncore.AppendArrayEnd(vv, idx)
	} else {
		v = append(v, m.doc...)
	}
	s.vbuf = v
	s.dataSize += int64(len(key) + len(v))
	if s.srt == nil {
		// Top-k (limit set): keep only the limit smallest keys in a bounded max-heap.
		s.usedMem += s.top.push(key, v, s.limit)
		if s.usedMem <= s.memLimit {
			return nil
		}
		if !s.allowDisk {
			return s.memErr()
		}
		// The k documents themselves exceed the limit: continue as an external sort.
		if err := s.startSorter(); err != nil {
			return err
		}
		for _, e := range s.top.e {
			if err := s.srt.Add(e.key, e.val); err != nil {
				return err
			}
		}
		s.top = topK{}
		return nil
	}
	s.usedMem += int64(len(key) + len(v))
	if !s.allowDisk && s.usedMem > s.memLimit {
		return s.memErr()
	}
	return s.srt.Add(key, v)
}

func (s *sortStage) memErr() error {
	return mongoerr.Newf(mongoerr.QueryExceededMemoryLimitNoDiskUseAllowed,
		"Executor error during find command :: caused by :: Sort exceeded memory limit of %d bytes, but did not opt in to external sorting.", s.memLimit)
}

func (s *sortStage) decode(v []byte) error {
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return mongoerr.New(mongoerr.InternalError, "sort: corrupt buffered value")
	}
	rid, err := recordid.FromKey(v[w : w+int(n)])
	if err != nil {
		return err
	}
	payload := v[w+int(n):]
	s.out = member{rid: rid, keyNames: s.keyNames}
	if s.covered {
		s.vals = s.vals[:0]
		vals, err := bsoncore.Array(payload).Values()
		if err != nil {
			return err
		}
		s.out.keyVals = append(s.vals, vals...)
	} else {
		s.out.doc = payload
	}
	return nil
}

func (s *sortStage) close() {
	s.child.close()
	if s.srt != nil {
		_ = s.srt.Close()
	}
}
func (s *sortStage) describe(b []byte) []byte {
	b = bsoncore.AppendStringElement(b, "stage", "SORT")
	b = bsoncore.AppendDocumentElement(b, "sortPattern", s.pattern)
	b = bsoncore.AppendInt32Element(b, "memLimit", int32(min(s.memLimit, 1<<31-1)))
	if s.limit > 0 {
		b = bsoncore.AppendInt64Element(b, "limitAmount", s.limit)
	}
	return bsoncore.AppendStringElement(b, "type", "simple")
}
func (s *sortStage) stats(b []byte) []byte {
	b = bsoncore.AppendInt64Element(b, "totalDataSizeSorted", s.dataSize)
	b = bsoncore.AppendBooleanElement(b, "usedDisk", s.spills > 0)
	b = bsoncore.AppendInt64Element(b, "spills", int64(s.spills))
	return bsoncore.AppendInt64Element(b, "spilledDataStorageSize", 0)
}

// ---- projection (also returnKey / showRecordId) ----

type projKind int

const (
	projSimple projKind = iota
	projDefault
	projCovered
	projReturnKey
)

type projStage struct {
	oneChild
	kind    projKind
	proj    *query.Projection // projSimple/projDefault
	spec    bsoncore.Document
	fields  []string // projCovered: output fields in order
	keyPos  []int
	showRID bool
	buf     []byte
	out     member
}

func (s *projStage) work(ctx context.Context) (*member, workState, error) {
	s.cs.works++
	m, st, err := s.child.work(ctx)
	if err != nil || st != advanced {
		return s.cs.passOn(st, err)
	}
	b := s.buf[:0]
	switch s.kind {
	case projReturnKey:
		idx, bb := bsoncore.AppendDocumentStart(b)
		for i, v := range m.keyVals {
			if i < len(m.keyNames) {
				bb = bsoncore.AppendValueElement(bb, m.keyNames[i], v)
			}
		}
		if s.showRID {
			bb = appendRID(bb, m.rid)
		}
		b, _ = bsoncore.AppendDocumentEnd(bb, idx)
	case projCovered:
		idx, bb := bsoncore.AppendDocumentStart(b)
		for i, f := range s.fields {
			bb = bsoncore.AppendValueElement(bb, f, m.keyVals[s.keyPos[i]])
		}
		b, _ = bsoncore.AppendDocumentEnd(bb, idx)
	default:
		doc := m.doc
		if s.proj != nil {
			var d *query.MatchDetails
			if m.details.HasElemMatchKey {
				d = &m.details
			}
			b, err = s.proj.Apply(doc, d, b)
			if err != nil {
				return nil, isEOF, err
			}
		} else {
			b = append(b, doc...)
		}
		if s.showRID {
			b = b[:len(b)-1]
			b = appendRID(b, m.rid)
			b = append(b, 0)
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
		}
	}
	s.buf = b
	s.out = member{rid: m.rid, doc: b}
	return s.cs.advance(&s.out)
}

func appendRID(b []byte, rid recordid.ID) []byte {
	if rid.IsLong() {
		return bsoncore.AppendInt64Element(b, "$recordId", rid.Int64())
	}
	return bsoncore.AppendBinaryElement(b, "$recordId", 0, rid.Bytes())
}

func (s *projStage) describe(b []byte) []byte {
	switch s.kind {
	case projReturnKey:
		return bsoncore.AppendStringElement(b, "stage", "RETURN_KEY")
	case projCovered:
		b = bsoncore.AppendStringElement(b, "stage", "PROJECTION_COVERED")
	case projSimple:
		b = bsoncore.AppendStringElement(b, "stage", "PROJECTION_SIMPLE")
	default:
		b = bsoncore.AppendStringElement(b, "stage", "PROJECTION_DEFAULT")
	}
	if s.spec != nil {
		b = bsoncore.AppendDocumentElement(b, "transformBy", s.spec)
	}
	return b
}
func (s *projStage) stats(b []byte) []byte { return b }

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
