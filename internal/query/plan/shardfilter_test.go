package plan

import (
	"context"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// notTens owns every document whose a is not a multiple of 10 (a stand-in shard key).
type notTens struct{ calls int }

func (o *notTens) KeyBelongs(doc bsoncore.Document) bool {
	o.calls++
	a, ok := doc.Lookup("a").AsInt64OK()
	return !ok || a%10 != 0
}

// stageChain lists the stage names from a plan document's root down its inputStage chain
// (the first of inputStages where there are several).
func stageChain(d bsoncore.Document) []string {
	var out []string
	for len(d) > 0 {
		out = append(out, d.Lookup("stage").StringValue())
		if in, ok := d.Lookup("inputStage").DocumentOK(); ok {
			d = in
			continue
		}
		if arr, ok := d.Lookup("inputStages").ArrayOK(); ok {
			vals, _ := arr.Values()
			if len(vals) > 0 {
				d = vals[0].Document()
				continue
			}
		}
		break
	}
	return out
}

// findStage returns the first stage named name in the chain below d.
func findStage(d bsoncore.Document, name string) bsoncore.Document {
	for len(d) > 0 {
		if d.Lookup("stage").StringValue() == name {
			return d
		}
		in, ok := d.Lookup("inputStage").DocumentOK()
		if !ok {
			return nil
		}
		d = in
	}
	return nil
}

func TestShardFilterStage(t *testing.T) {
	f := newPlanFixture(t, 100) // {_id: i, a: i}, index a_1
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	cases := []struct {
		name  string
		req   Request
		want  int      // documents returned with the filter
		plain int      // without it
		chain []string // winningPlan with the filter, from the root
		skips int64    // chunkSkips
	}{
		{"collscan", Request{}, 90, 100,
			[]string{"SHARDING_FILTER", "COLLSCAN"}, 10},
		{"ixscan", Request{Filter: mustDoc(bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 5}, {Key: "$lt", Value: 25}}}})}, 18, 20,
			[]string{"SHARDING_FILTER", "FETCH", "IXSCAN"}, 2},
		// The _id fast path: IDHACK still answers, under the filter (as MongoDB does).
		{"idhack unowned", Request{Filter: mustDoc(bson.D{{Key: "_id", Value: 30}})}, 0, 1,
			[]string{"SHARDING_FILTER", "IDHACK"}, 1},
		{"idhack owned", Request{Filter: mustDoc(bson.D{{Key: "_id", Value: 31}})}, 1, 1,
			[]string{"SHARDING_FILTER", "IDHACK"}, 0},
		// Orphans do not count towards limit: the filter sits below SORT and LIMIT.
		{"sort limit", Request{Filter: mustDoc(bson.D{{Key: "a", Value: bson.D{{Key: "$lte", Value: 40}}}}),
			Sort: mustDoc(bson.D{{Key: "_id", Value: -1}}), Limit: 5}, 5, 5,
			[]string{"LIMIT", "SORT", "SHARDING_FILTER", "FETCH", "IXSCAN"}, 5}, // SORT reads all 41
		{"or", Request{Filter: mustDoc(bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "a", Value: 10}}, bson.D{{Key: "_id", Value: 11}}}}})}, 1, 2,
			[]string{"SHARDING_FILTER", "FETCH", "OR", "IXSCAN"}, 1},
		// A covered plan would have no document to filter: it fetches instead.
		{"not covered", Request{Filter: mustDoc(bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: 20}}}}),
			Projection: mustDoc(bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: 0}})}, 18, 20,
			[]string{"PROJECTION_SIMPLE", "SHARDING_FILTER", "FETCH", "IXSCAN"}, 2},
		{"count", Request{CountOnly: true}, 90, 100,
			[]string{"SHARDING_FILTER", "COLLSCAN"}, 10},
		{"write", Request{ForWrite: true, WriteStage: "DELETE", Filter: mustDoc(bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: 20}}}})}, 18, 20,
			[]string{"SHARDING_FILTER", "FETCH", "IXSCAN"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := c.req
			req.NS = "test.c"
			ex, n := f.run(t, ru, req)
			if n != c.plain {
				t.Errorf("without a filter: %d documents, want %d", n, c.plain)
			}
			qp, es := ex.Explain(ExecutionStats)
			ex.Close()
			if root := stageChain(qp.Lookup("winningPlan").Document())[0]; c.name == "not covered" && root != "PROJECTION_COVERED" {
				t.Errorf("without a filter the plan should be covered, root %s", root)
			}
			for _, d := range []bsoncore.Document{qp.Lookup("winningPlan").Document(), es.Lookup("executionStages").Document()} {
				if slices.Contains(stageChain(d), "SHARDING_FILTER") {
					t.Errorf("SHARDING_FILTER without an ownership filter: %v", d)
				}
			}

			owner := &notTens{}
			req.Ownership = owner
			ex, n = f.run(t, ru, req)
			defer ex.Close()
			if n != c.want {
				t.Errorf("with the filter: %d documents, want %d", n, c.want)
			}
			if owner.calls == 0 {
				t.Errorf("the ownership filter was never asked")
			}
			qp, es = ex.Explain(ExecutionStats)
			wp := qp.Lookup("winningPlan").Document()
			if req.WriteStage != "" {
				wp = wp.Lookup("inputStage").Document() // under DELETE
			}
			if req.CountOnly {
				wp = wp.Lookup("inputStage").Document() // under COUNT
			}
			if got := stageChain(wp); !slices.Equal(got, c.chain) {
				t.Errorf("winningPlan %v, want %v", got, c.chain)
			}
			sf := findStage(es.Lookup("executionStages").Document(), "SHARDING_FILTER")
			if sf == nil {
				t.Fatalf("no SHARDING_FILTER in executionStats: %v", es)
			}
			if got, _ := sf.Lookup("chunkSkips").AsInt64OK(); got != c.skips {
				t.Errorf("chunkSkips %d, want %d", got, c.skips)
			}
			if got, _ := sf.Lookup("nReturned").AsInt64OK(); got != int64(c.want) && req.Limit == 0 {
				t.Errorf("SHARDING_FILTER nReturned %d, want %d", got, c.want)
			}
		})
	}
}

// Targets (update/delete/findAndModify) never return an unowned document.
func TestShardFilterTargets(t *testing.T) {
	f := newPlanFixture(t, 50)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	ctx := context.Background()
	for _, filter := range []bsoncore.Document{nil, mustDoc(bson.D{{Key: "_id", Value: 20}}), mustDoc(bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 20}}}})} {
		ts, ex, err := Targets(ctx, ru, f.meta, f.coll, Request{NS: "test.c", Filter: filter, Ownership: &notTens{}})
		if err != nil {
			t.Fatal(err)
		}
		ex.Close()
		for _, tg := range ts {
			if a, _ := tg.Doc.Lookup("a").AsInt64OK(); a%10 == 0 {
				t.Errorf("filter %v: target %v is not owned", filter, tg.Doc)
			}
		}
	}
}

// The fast count reads the record store's counts, which include orphans: it must not be used
// under an ownership filter.
func TestShardFilterCount(t *testing.T) {
	f := newPlanFixture(t, 100)
	ru := f.e.NewRecoveryUnit()
	defer ru.Close()
	ctx := context.Background()
	cases := []struct {
		req         Request
		plain, want int64
	}{
		{Request{}, 100, 90},
		{Request{Skip: 5}, 95, 85},
		{Request{Limit: 95}, 95, 90},
		{Request{Filter: mustDoc(bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: 30}}}})}, 30, 27},
		{Request{Hint: bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "a_1")}}, 100, 90},
	}
	for i, c := range cases {
		c.req.NS = "test.c"
		if !fastCountable(c.req) != (len(c.req.Filter) > 0 || c.req.Hint.Type != 0) {
			t.Errorf("case %d: fastCountable %v", i, fastCountable(c.req))
		}
		n, err := Count(ctx, ru, f.meta, f.coll, c.req)
		if err != nil {
			t.Fatal(err)
		}
		if n != c.plain {
			t.Errorf("case %d: count %d, want %d", i, n, c.plain)
		}
		c.req.Ownership = &notTens{}
		if fastCountable(c.req) {
			t.Errorf("case %d: fast count under an ownership filter", i)
		}
		if n, err = Count(ctx, ru, f.meta, f.coll, c.req); err != nil {
			t.Fatal(err)
		}
		if n != c.want {
			t.Errorf("case %d: count under the filter %d, want %d", i, n, c.want)
		}
	}
	if n, err := Count(ctx, ru, nil, nil, Request{NS: "test.none", Ownership: &notTens{}}); err != nil || n != 0 {
		t.Fatalf("missing collection: %d, %v", n, err)
	}
}
