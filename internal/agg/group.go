package agg

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/index/sorter"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
	"humongo/internal/query/expr"
)

// groupStage is $group. Groups are found by the KeyString of their _id, so values that
// compare equal (1, 1.0, NumberLong(1)) share a group, and missing and null share one (the
// _id then being null), as in MongoDB. Groups are emitted in first-seen order.
type groupStage struct {
	raw value
	// _id: either one expression, or an object whose fields are evaluated one by one (so a
	// missing field becomes null instead of disappearing).
	idX     expr.Expression
	idNames []string
	idXs    []expr.Expression
	fields  []string
	accs    []*expr.AccSpec
}

func parseGroup(spec value, p *pctx) (stage, error) {
	els, err := objectElems(spec, mongoerr.Location15947, "a group's fields must be specified in an object")
	if err != nil {
		return nil, err
	}
	g := &groupStage{raw: spec}
	idSeen := false
	for _, el := range els {
		k, v := el.Key(), el.Value()
		if k == "_id" {
			idSeen = true
			if sd, isDoc := v.DocumentOK(); isDoc && !expr.IsOperatorDoc(v) {
				sels, err := expr.DocElems(sd)
				if err != nil {
					return nil, err
				}
				if len(sels) > 0 {
					seen := map[string]bool{}
					for _, se := range sels {
						// An _id document is an object literal (ExpressionObject::parse).
						if seen[se.Key()] {
							return nil, mongoerr.Newf(mongoerr.Location16406,
								"duplicate field name specified in object literal: %s", index.FormatDoc(sd))
						}
						seen[se.Key()] = true
						x, err := p.parseExpr(se.Value())
						if err != nil {
							return nil, err
						}
						g.idNames = append(g.idNames, se.Key())
						g.idXs = append(g.idXs, x)
					}
					continue
				}
			}
			if g.idX, err = p.parseExpr(v); err != nil {
				return nil, err
			}
			continue
		}
		// accumulation_statement.cpp's parseAccumulationStatement, in its order.
		ad, isDoc := v.DocumentOK()
		var aels []bsoncore.Element
		if isDoc {
			if aels, err = expr.DocElems(ad); err != nil {
				return nil, err
			}
		}
		if len(aels) == 0 || !strings.HasPrefix(aels[0].Key(), "$") {
			return nil, mongoerr.Newf(mongoerr.Location40234, "The field '%s' must be an accumulator object", k)
		}
		if strings.Contains(k, ".") {
			return nil, mongoerr.Newf(mongoerr.Location40235, "The field name '%s' cannot contain '.'", k)
		}
		if strings.HasPrefix(k, "$") {
			return nil, mongoerr.Newf(mongoerr.Location40236, "The field name '%s' cannot be an operator name", k)
		}
		if len(aels) != 1 {
			return nil, mongoerr.Newf(mongoerr.Location40238, "The field '%s' must specify one accumulator", k)
		}
		a, err := expr.ParseAccumulator(aels[0].Key(), aels[0].Value(), p.exprPC())
		if err != nil {
			return nil, err
		}
		g.fields = append(g.fields, k)
		g.accs = append(g.accs, a)
	}
	if !idSeen {
		return nil, mongoerr.New(mongoerr.Location15955, "a group specification must include an _id")
	}
	return g, nil
}

func (g *groupStage) name() string { return "$group" }
func (g *groupStage) spec() value  { return g.raw }

type groupState struct {
	id   value
	accs []expr.Accumulator
}

// grouper accumulates groups; shared by $group and $bucket.
type grouper struct {
	accs   []*expr.AccSpec
	index  map[string]int
	groups []*groupState
	mem    int64
	kb     keystring.Builder
	// Above the memory limit with allowDiskUse, every further document goes to an external
	// sorter keyed by (group key, arrival order); finish merges the sorted stream into the
	// in-memory groups and folds the others one group at a time.
	spill *sorter.Sorter
	seq   uint64
}

func newGrouper(accs []*expr.AccSpec) *grouper {
	return &grouper{accs: accs, index: map[string]int{}}
}

func (gr *grouper) add(id value, ec *expr.EvalContext, rc *runCtx, stageName string) error {
	gr.kb.Reset(keystring.AllAscending)
	// Under a collation, ids that collate equal ("a", "A" at strength 2) share a group,
	// which keeps the first-seen id.
	gr.kb.AppendValue(expr.CollKey(rc.coll, id))
	if err := gr.kb.Err(); err != nil {
		return err
	}
	k := gr.kb.Bytes()
	if gr.spill != nil {
		key := binary.BigEndian.AppendUint64(k, gr.seq)
		gr.seq++
		return gr.spill.Add(key, expr.DocOf("i", id, "d", expr.Doc(ec.Root)))
	}
	i, ok := gr.index[string(k)]
	if !ok {
		if id.Type == 0 {
			id = expr.Null
		}
		st := &groupState{id: id, accs: make([]expr.Accumulator, len(gr.accs))}
		for j, a := range gr.accs {
			st.accs[j] = a.New()
		}
		i = len(gr.groups)
		gr.index[string(k)] = i
		gr.groups = append(gr.groups, st)
		gr.mem += int64(2*len(k)) + expr.ValueSize(id) + int64(64*(1+len(gr.accs)))
	}
	st := gr.groups[i]
	for _, a := range st.accs {
		n, err := a.Add(ec)
		if err != nil {
			return err
		}
		gr.mem += n
	}
	if gr.mem > rc.maxMem() {
		var err error
		gr.spill, err = rc.spillSorter(stageName, nil)
		return err
	}
	return nil
}

// close releases the spill file.
func (gr *grouper) close() {
	if gr.spill != nil {
		gr.spill.Close()
	}
}

// finish folds the spilled documents (if any) and returns the groups to output: the
// in-memory ones first, then those only seen after spilling began.
func (gr *grouper) finish(ec *expr.EvalContext) ([]*groupState, error) {
	if gr.spill == nil {
		return gr.groups, nil
	}
	it, err := gr.spill.Done()
	if err != nil {
		return nil, err
	}
	groups := gr.groups
	var cur *groupState
	var curKey []byte
	for it.Next() {
		key := it.Key()
		gk := key[:len(key)-8]
		if cur == nil || !bytes.Equal(gk, curKey) {
			curKey = append(curKey[:0], gk...)
			if i, ok := gr.index[string(gk)]; ok {
				cur = gr.groups[i]
			} else {
				rec := bsoncore.Document(bytes.Clone(it.Value()))
				cur = &groupState{id: expr.Field(rec, "i"), accs: make([]expr.Accumulator, len(gr.accs))}
				for j, a := range gr.accs {
					cur.accs[j] = a.New()
				}
				groups = append(groups, cur)
			}
		}
		rec := bsoncore.Document(bytes.Clone(it.Value()))
		d, ok := expr.Field(rec, "d").DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.InternalError, "corrupt $group spill record")
		}
		ec.Root, ec.Current = d, nil
		for _, a := range cur.accs {
			if _, err := a.Add(ec); err != nil {
				return nil, err
			}
		}
	}
	return groups, it.Err()
}

func (gr *grouper) output(fields []string, idField string, ec *expr.EvalContext) ([]bsoncore.Document, error) {
	defer gr.close()
	groups, err := gr.finish(ec)
	if err != nil {
		return nil, err
	}
	out := make([]bsoncore.Document, 0, len(groups))
	for _, st := range groups {
		d := expr.NewDoc()
		d.Add(idField, st.id)
		for j, a := range st.accs {
			v, err := a.Result()
			if err != nil {
				return nil, err
			}
			d.Add(fields[j], v)
		}
		out = append(out, d.Done())
	}
	return out, nil
}

func (g *groupStage) id(ec *expr.EvalContext) (value, error) {
	if g.idX != nil {
		return g.idX.Eval(ec)
	}
	d := expr.NewDoc()
	for i, x := range g.idXs {
		v, err := x.Eval(ec)
		if err != nil {
			return expr.Missing, err
		}
		if v.Type == 0 {
			v = expr.Null
		}
		d.Add(g.idNames[i], v)
	}
	return expr.Doc(d.Done()), nil
}

func (g *groupStage) run(ctx context.Context, in Source, rc *runCtx) (Source, error) {
	return blocking(in, func(ctx context.Context) ([]bsoncore.Document, error) {
		return groupAll(ctx, in, rc, "$group", g.accs, g.fields, g.id)
	}), nil
}

// groupAll folds the whole input into groups ($group, $bucket): idOf computes a document's
// group _id (the document is in ec), and the result is one document per group with the
// accumulators' results under fields.
func groupAll(ctx context.Context, in Source, rc *runCtx, stageName string, accs []*expr.AccSpec, fields []string,
	idOf func(ec *expr.EvalContext) (value, error)) ([]bsoncore.Document, error) {
	gr := newGrouper(accs)
	defer gr.close()
	ec := rc.evalCtx(nil)
	err := forEach(ctx, in, func(d bsoncore.Document) error {
		ec.Root, ec.Current = d, nil
		id, err := idOf(ec)
		if err != nil {
			return err
		}
		return gr.add(id, ec, rc, stageName)
	})
	if err != nil {
		return nil, err
	}
	return gr.output(fields, "_id", ec)
}

// forEach calls fn with each document of in, stopping at the end or the first error.
func forEach(ctx context.Context, in Source, fn func(d bsoncore.Document) error) error {
	for {
		d, ok, err := in.Next(ctx)
		if err != nil || !ok {
			return err
		}
		if err := fn(d); err != nil {
			return err
		}
	}
}

// blocking is a Source that computes all its output on the first Next.
func blocking(in Source, load func(ctx context.Context) ([]bsoncore.Document, error)) Source {
	var out []bsoncore.Document
	loaded := false
	i := 0
	return &funcSrc{closeFn: in.Close, next: func(ctx context.Context) (bsoncore.Document, bool, error) {
		if !loaded {
			loaded = true
			var err error
			if out, err = load(ctx); err != nil {
				return nil, false, err
			}
		}
		if i >= len(out) {
			return nil, false, nil
		}
		i++
		return out[i-1], true, nil
	}}
}
