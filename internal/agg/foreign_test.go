package agg

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/query"
)

// queryResolver is a memResolver that also answers Querier probes by matching each filter
// over the collection (as a planner with an index on the probed field would, in natural
// order), recording the filters.
type queryResolver struct {
	*memResolver
	index   string
	filters []string
}

func (r *queryResolver) Query(ctx context.Context, db, coll string, filter bsoncore.Document) (Source, string, error) {
	r.filters = append(r.filters, filter.String())
	m, err := query.Parse(filter, query.ParseOptions{})
	if err != nil {
		return nil, "", err
	}
	src, _ := r.Open(ctx, db, coll)
	all, _ := Drain(ctx, src)
	var out []bsoncore.Document
	for _, d := range all {
		if ok, err := m.Matches(d); err != nil {
			return nil, "", err
		} else if ok {
			out = append(out, d)
		}
	}
	return SliceSource(out), r.index, nil
}

func joinModesRes(t *testing.T) *memResolver {
	return &memResolver{colls: map[string][]bsoncore.Document{
		"test.f": parseDocs(t, `[
			{"_id": 1, "v": 1, "n": 2},
			{"_id": 2, "v": 1.0, "n": 3},
			{"_id": 3, "v": [1, 2], "n": 4},
			{"_id": 4, "v": [[1, 2]], "n": 1},
			{"_id": 5, "v": null, "n": 6},
			{"_id": 6, "n": 5},
			{"_id": 7, "v": "a", "n": "b"},
			{"_id": 8, "v": {"$regularExpression": {"pattern": "^a", "options": ""}}},
			{"_id": 9, "v": "abc"},
			{"_id": 10, "v": [], "n": 7},
			{"_id": 11, "v": {"x": 1}},
			{"_id": 12, "v": 2, "n": [3, 4]},
			{"_id": 13, "v": 3, "n": null}]`),
	}}
}

// TestJoinModesAgree: the three strategies of the foreign side (indexed queries through a
// Querier, the in-memory hash join, the streamed scan when the collection exceeds the cache)
// return the same matches for the same probes.
func TestJoinModesAgree(t *testing.T) {
	local := `[{"_id": 1, "k": 1}, {"_id": 2, "k": [1, 2]}, {"_id": 3, "k": [[1, 2]]}, {"_id": 4, "k": null},
		{"_id": 5}, {"_id": 6, "k": "a"}, {"_id": 7, "k": {"$regularExpression": {"pattern": "^a", "options": ""}}},
		{"_id": 8, "k": []}, {"_id": 9, "k": {"x": 1}}, {"_id": 10, "k": 2.0}, {"_id": 11, "k": [3, "abc"]}]`
	pipelines := []string{
		`[{"$lookup": {"from": "f", "localField": "k", "foreignField": "v", "as": "j"}}, {"$project": {"j": "$j._id"}}]`,
		`[{"$lookup": {"from": "f", "let": {"kk": "$k"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$$kk", "$v"]}}}], "as": "j"}}, {"$project": {"j": "$j._id"}}]`,
		`[{"$lookup": {"from": "f", "localField": "k", "foreignField": "v", "as": "j", "pipeline": [{"$match": {"n": {"$gt": 1}}}]}}, {"$project": {"j": "$j._id"}}]`,
		`[{"$graphLookup": {"from": "f", "startWith": "$k", "connectFromField": "n", "connectToField": "v", "as": "j", "depthField": "d"}}, {"$project": {"j": {"$map": {"input": "$j", "in": ["$$this._id", "$$this.d"]}}}}]`,
		`[{"$graphLookup": {"from": "f", "startWith": "$k", "connectFromField": "n", "connectToField": "v", "as": "j", "restrictSearchWithMatch": {"_id": {"$ne": 3}}}}, {"$project": {"j": "$j._id"}}]`,
	}
	norm := func(docs []bsoncore.Document) string {
		s := ""
		for _, d := range docs {
			v := d.Lookup("j")
			vals, _ := v.Array().Values()
			parts := make([]bsoncore.Document, len(vals))
			for i, e := range vals {
				parts[i] = bsoncore.NewDocumentBuilder().AppendValue("x", e).Build()
			}
			s += fmt.Sprint(d.Lookup("_id"), sortedRender(parts), "\n")
		}
		return s
	}
	run := func(res CollectionResolver, cache int64, pipeline string) string {
		t.Helper()
		p, err := Parse(parseDocs(t, pipeline), ParseContext{DB: "test"})
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Run(context.Background(), SliceSource(parseDocs(t, local)), &Context{Resolver: res, LookupCacheBytes: cache})
		if err != nil {
			t.Fatal(err)
		}
		docs, err := Drain(context.Background(), out)
		if err != nil {
			t.Fatal(err)
		}
		return norm(docs)
	}
	for i, pl := range pipelines {
		hash := run(joinModesRes(t), 0, pl)
		if scan := run(joinModesRes(t), 1, pl); scan != hash {
			t.Errorf("pipeline %d: scan\n%s\nhash join\n%s", i, scan, hash)
		}
		qr := &queryResolver{memResolver: joinModesRes(t), index: "v_1"}
		if ix := run(qr, 0, pl); ix != hash {
			t.Errorf("pipeline %d: indexed\n%s\nhash join\n%s", i, ix, hash)
		}
		if len(qr.filters) < 10 {
			t.Errorf("pipeline %d: %d queries, want one per probe: %v", i, len(qr.filters), qr.filters)
		}
		// A Querier whose plan is a collection scan is asked once, then the hash join runs.
		qs := &queryResolver{memResolver: joinModesRes(t)}
		if got := run(qs, 0, pl); got != hash || len(qs.filters) != 1 {
			t.Errorf("pipeline %d: collection-scan querier: %d queries, result\n%s", i, len(qs.filters), got)
		}
	}
}

// TestJoinMemoryLimits: 4568 for one document's $lookup matches over LookupMaxResultBytes,
// 40099 for a $graphLookup search over GraphLookupMaxMemoryBytes.
func TestJoinMemoryLimits(t *testing.T) {
	res := joinModesRes(t)
	run := func(ac *Context, pipeline string) error {
		p, err := Parse(parseDocs(t, pipeline), ParseContext{DB: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ac.Resolver = res
		out, err := p.Run(context.Background(), SliceSource(parseDocs(t, `[{"_id": 1, "k": 1}]`)), ac)
		if err != nil {
			return err
		}
		_, err = Drain(context.Background(), out)
		return err
	}
	msg := func(err error) string {
		if e, ok := mongoerr.As(err); ok {
			return e.Msg
		}
		return ""
	}
	lookup := `[{"$lookup": {"from": "f", "pipeline": [], "as": "j"}}]`
	if err := run(&Context{LookupMaxResultBytes: 100}, lookup); mongoerr.CodeOf(err) != mongoerr.Location4568 ||
		msg(err) != "Total size of documents in f matching pipeline's $lookup stage exceeds 100 bytes" {
		t.Errorf("lookup over the limit: %v", err)
	}
	if err := run(&Context{LookupMaxResultBytes: 10000}, lookup); err != nil {
		t.Errorf("lookup under the limit: %v", err)
	}
	graph := `[{"$graphLookup": {"from": "f", "startWith": "$k", "connectFromField": "n", "connectToField": "v", "as": "j"}}]`
	if err := run(&Context{GraphLookupMaxMemoryBytes: 100}, graph); mongoerr.CodeOf(err) != mongoerr.Location40099 ||
		msg(err) != "$graphLookup reached maximum memory consumption" {
		t.Errorf("graphLookup over the limit: %v", err)
	}
	if err := run(&Context{GraphLookupMaxMemoryBytes: 100000}, graph); err != nil {
		t.Errorf("graphLookup under the limit: %v", err)
	}
}

// TestIndexedJoinSwitchesToHash: after many indexed probes, a foreign collection that is
// small next to them is hashed instead; the matches stay the same.
func TestIndexedJoinSwitchesToHash(t *testing.T) {
	var foreign, local []bsoncore.Document
	for i := range 50 {
		foreign = append(foreign, parseDocs(t, fmt.Sprintf(`[{"_id": %d, "v": %d}]`, i, i%25))...)
	}
	for i := range 3000 {
		local = append(local, parseDocs(t, fmt.Sprintf(`[{"_id": %d, "k": %d}]`, i, i%30))...)
	}
	p, err := Parse(parseDocs(t, `[{"$lookup": {"from": "f", "localField": "k", "foreignField": "v", "as": "j"}}, {"$project": {"n": {"$size": "$j"}}}]`), ParseContext{DB: "test"})
	if err != nil {
		t.Fatal(err)
	}
	qr := &queryResolver{memResolver: &memResolver{colls: map[string][]bsoncore.Document{"test.f": foreign}}, index: "v_1"}
	out, err := p.Run(context.Background(), SliceSource(local), &Context{Resolver: qr})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Drain(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range docs {
		want := int32(2)
		if i%30 >= 25 {
			want = 0
		}
		if n := d.Lookup("n").Int32(); n != want {
			t.Fatalf("document %d: %d matches, want %d", i, n, want)
		}
	}
	if n := len(qr.filters); n != firstLoadProbes {
		t.Fatalf("%d indexed probes, want %d before the switch", n, firstLoadProbes)
	}
}

// cancelAfter cancels ctx with cause after n documents of src.
type cancelAfter struct {
	Source
	n      int
	cancel context.CancelCauseFunc
	cause  error
}

func (c *cancelAfter) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if c.n--; c.n == 0 {
		c.cancel(c.cause)
	}
	return c.Source.Next(ctx)
}

type cancelResolver struct {
	*memResolver
	after  int
	cancel context.CancelCauseFunc
	cause  error
}

func (r *cancelResolver) Open(ctx context.Context, db, coll string) (Source, error) {
	src, err := r.memResolver.Open(ctx, db, coll)
	return &cancelAfter{Source: src, n: r.after, cancel: r.cancel, cause: r.cause}, err
}

// TestJoinInterrupted: a join stops with the operation's interruption cause in the middle of
// reading the foreign side, in each strategy that reads it.
func TestJoinInterrupted(t *testing.T) {
	var foreign []bsoncore.Document
	for i := range 3000 {
		foreign = append(foreign, parseDocs(t, fmt.Sprintf(`[{"_id": %d, "v": %d}]`, i, i))...)
	}
	local := parseDocs(t, `[{"_id": 1, "k": 1}, {"_id": 2, "k": 2}, {"_id": 3, "k": 3}]`)
	cause := mongoerr.New(mongoerr.Interrupted, "operation was interrupted")
	for _, pl := range []string{
		`[{"$lookup": {"from": "f", "localField": "k", "foreignField": "v", "as": "j"}}]`,
		`[{"$graphLookup": {"from": "f", "startWith": "$k", "connectFromField": "v", "connectToField": "v", "as": "j"}}]`,
	} {
		for _, cache := range []int64{0, 1} {
			ctx, cancel := context.WithCancelCause(context.Background())
			res := &cancelResolver{memResolver: &memResolver{colls: map[string][]bsoncore.Document{"test.f": foreign}},
				after: 1500, cancel: cancel, cause: cause}
			p, err := Parse(parseDocs(t, pl), ParseContext{DB: "test"})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Run(ctx, SliceSource(local), &Context{Resolver: res, LookupCacheBytes: cache})
			if err == nil {
				_, err = Drain(ctx, out)
			}
			if !mongoerr.Is(err, mongoerr.Interrupted) {
				t.Errorf("%s cache %d: %v, want the interruption", pl, cache, err)
			}
			cancel(nil)
		}
	}
}
