package agg

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/collation"
	"humongo/internal/index/sorter"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
)

// sortKeyGen turns a document into a memcmp-ordered key for a sort pattern, using KeyString
// with the pattern's Ordering. Array values sort by their smallest element ascending and
// their largest descending, as MongoDB's sort does; missing sorts as null.
//
// A sortKeyGen is immutable after construction and safe for concurrent use (expressions
// such as $sortArray and accumulators such as $topN share one across evaluations).
type sortKeyGen struct {
	paths [][]string
	desc  []bool
	ord   keystring.Ordering
}

func newSortKeyGen(pattern bsoncore.Document) (*sortKeyGen, error) {
	els, err := docElems(pattern)
	if err != nil {
		return nil, err
	}
	if len(els) == 0 {
		return nil, mongoerr.New(mongoerr.Location15976, "$sort stage must have at least one sort key")
	}
	if len(els) > 32 {
		return nil, mongoerr.New(mongoerr.BadValue, "too many compound keys")
	}
	g := &sortKeyGen{}
	for i, el := range els {
		v := el.Value()
		n, ok := v.AsInt64OK()
		if !ok {
			if f, isF := v.DoubleOK(); isF {
				n, ok = int64(f), f == float64(int64(f))
			}
		}
		if !ok || (n != 1 && n != -1) {
			if isOperatorDoc(v) {
				return nil, mongoerr.Newf(mongoerr.Location17312, "$meta sort keys are not supported: %s", el.Key())
			}
			return nil, mongoerr.Newf(mongoerr.Location15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		path, err := splitFieldPath(el.Key())
		if err != nil {
			return nil, err
		}
		g.paths = append(g.paths, path)
		g.desc = append(g.desc, n == -1)
		if n == -1 {
			g.ord |= 1 << uint(i)
		}
	}
	return g, nil
}

// key returns a freshly allocated key; strings order under c (nil: binary), by their
// collation sort keys, as a collated index orders them.
func (g *sortKeyGen) key(doc bsoncore.Document, c *collation.Collator) []byte {
	var kb keystring.Builder
	kb.Reset(g.ord)
	for i, p := range g.paths {
		kb.AppendValue(collKey(c, sortValue(getPath(doc, p), g.desc[i], c)))
	}
	return kb.Bytes()
}

func sortValue(v value, desc bool, c *collation.Collator) value {
	if v.Type == 0 {
		return nullV
	}
	if v.Type != bsoncore.TypeArray {
		return v
	}
	vals, _ := arrValues(v)
	var flat []value
	var walk func([]value)
	walk = func(vs []value) {
		for _, e := range vs {
			if e.Type == bsoncore.TypeArray {
				sub, _ := arrValues(e)
				walk(sub)
				continue
			}
			flat = append(flat, e)
		}
	}
	walk(vals)
	if len(flat) == 0 {
		return value{Type: bsoncore.TypeUndefined} // [] sorts below null
	}
	best := flat[0]
	for _, e := range flat[1:] {
		if c := cmpC(e, best, collOf(c)); (c < 0 && !desc) || (c > 0 && desc) {
			best = e
		}
	}
	return best
}

func compareBytes(a, b []byte) int { return bytes.Compare(a, b) }

// ---- $sort ----

type sortStage struct {
	pattern bsoncore.Document
	limit   int64 // > 0: top-k (a $limit was absorbed)
}

func parseSort(spec value, _ *pctx) (stage, error) {
	d, ok := spec.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.Location15973, "the $sort key specification must be an object")
	}
	if _, err := newSortKeyGen(d); err != nil {
		return nil, err
	}
	return &sortStage{pattern: d}, nil
}

func (s *sortStage) name() string { return "$sort" }
func (s *sortStage) spec() value {
	if s.limit > 0 {
		return docV(docOf("sortKey", docV(s.pattern), "limit", i64V(s.limit)))
	}
	return docV(docOf("sortKey", docV(s.pattern)))
}

type sortEntry struct {
	key []byte // sort key followed by an 8-byte sequence number (stable order)
	doc bsoncore.Document
}

func (s *sortStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	g, err := newSortKeyGen(s.pattern)
	if err != nil {
		return nil, err
	}
	var out Source
	return &funcSrc{closeFn: func() {
		in.Close()
		if out != nil {
			out.Close()
		}
	}, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		if out == nil {
			var err error
			if out, err = s.load(ctx, in, g, rc); err != nil {
				return nil, false, err
			}
		}
		return out.Next(ctx)
	}}, nil
}

func (s *sortStage) load(ctx context.Context, in Source, g *sortKeyGen, rc *runCtx) (Source, error) {
	var entries []sortEntry
	var mem int64
	var seq uint64
	var ext *sorter.Sorter
	top := &topK{k: int(s.limit)}
	err := forEach(ctx, in, func(d bsoncore.Document) error {
		k := binary.BigEndian.AppendUint64(g.key(d, rc.coll), seq)
		seq++
		if s.limit > 0 {
			// Top-k keeps only the k best entries in a max-heap.
			top.push(sortEntry{key: k, doc: d})
			return nil
		}
		if ext != nil {
			return ext.Add(k, d)
		}
		entries = append(entries, sortEntry{key: k, doc: d})
		mem += int64(len(k) + len(d) + 48)
		if mem <= rc.maxMem() {
			return nil
		}
		var err error
		if ext, err = rc.spillSorter("$sort", nil); err != nil {
			return err
		}
		for _, e := range entries {
			if err := ext.Add(e.key, e.doc); err != nil {
				return err
			}
		}
		entries = nil
		return nil
	})
	if err != nil {
		if ext != nil {
			ext.Close()
		}
		return nil, err
	}
	if ext != nil {
		it, err := ext.Done()
		if err != nil {
			ext.Close()
			return nil, err
		}
		return &funcSrc{closeFn: func() { ext.Close() }, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
			if !it.Next() {
				return nil, false, it.Err()
			}
			return bytes.Clone(it.Value()), true, nil
		}}, nil
	}
	if s.limit > 0 {
		entries = top.h
	}
	slices.SortFunc(entries, func(a, b sortEntry) int { return bytes.Compare(a.key, b.key) })
	docs := make([]bsoncore.Document, len(entries))
	for i, e := range entries {
		docs[i] = e.doc
	}
	return sliceSource(docs), nil
}

// topK is a bounded max-heap of sort entries.
type topK struct {
	k int
	h []sortEntry
}

func (t *topK) Len() int           { return len(t.h) }
func (t *topK) Less(i, j int) bool { return bytes.Compare(t.h[i].key, t.h[j].key) > 0 }
func (t *topK) Swap(i, j int)      { t.h[i], t.h[j] = t.h[j], t.h[i] }
func (t *topK) Push(x any)         { t.h = append(t.h, x.(sortEntry)) }
func (t *topK) Pop() any {
	x := t.h[len(t.h)-1]
	t.h = t.h[:len(t.h)-1]
	return x
}

func (t *topK) push(e sortEntry) {
	if len(t.h) < t.k {
		heap.Push(t, e)
		return
	}
	if bytes.Compare(e.key, t.h[0].key) < 0 {
		t.h[0] = e
		heap.Fix(t, 0)
	}
}
