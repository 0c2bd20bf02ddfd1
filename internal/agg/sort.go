package agg

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index/sorter"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

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
	if _, err := expr.NewSortKey(d); err != nil {
		return nil, err
	}
	return &sortStage{pattern: d}, nil
}

func (s *sortStage) name() string { return "$sort" }
func (s *sortStage) spec() value {
	if s.limit > 0 {
		return expr.Doc(expr.DocOf("sortKey", expr.Doc(s.pattern), "limit", expr.Int64(s.limit)))
	}
	return expr.Doc(expr.DocOf("sortKey", expr.Doc(s.pattern)))
}

type sortEntry struct {
	key []byte // sort key followed by an 8-byte sequence number (stable order)
	doc bsoncore.Document
}

func (s *sortStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	g, err := expr.NewSortKey(s.pattern)
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

func (s *sortStage) load(ctx context.Context, in Source, g *expr.SortKey, rc *runCtx) (Source, error) {
	var entries []sortEntry
	var mem int64
	var seq uint64
	var ext *sorter.Sorter
	top := &topK{k: int(s.limit)}
	err := forEach(ctx, in, func(d bsoncore.Document) error {
		k := binary.BigEndian.AppendUint64(g.Key(d, rc.coll), seq)
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
