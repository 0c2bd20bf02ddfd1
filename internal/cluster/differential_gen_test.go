package cluster

// The differential workload (issue 12's acceptance): one seeded stream of operations (CRUD
// with the query and update languages, aggregation, count/distinct, cursors read in small
// batches) applied to two deployments, a reference (a standalone) and the system under test
// (a sharded cluster through humongos), comparing every answer. Operations are chosen so the
// answer is defined: single-document writes name their document by _id, results whose order
// MongoDB leaves undefined are compared as multisets, errors by code only (the router's
// messages may differ), and no update changes a shard key or _id.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// diffOp is one generated operation: its description (for the failure report) and how to run
// it against a collection, returning a canonical form of the answer.
type diffOp struct {
	desc string
	run  func(ctx context.Context, c *mongo.Collection) string
}

// diffGen generates operations over documents {_id, g, a, b, n: {d}, arr}. g is the
// ranged key's leading field (sometimes missing: stored with a null shard key).
type diffGen struct {
	rng    *rand.Rand
	nextID int
}

var diffWords = []string{"ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen"}

func (g *diffGen) id() int {
	if g.nextID == 0 || g.rng.IntN(4) == 0 {
		g.nextID++
		return g.nextID
	}
	return 1 + g.rng.IntN(g.nextID) // an existing (or deleted) id
}

// keyOf is the g of document id: a function of the id (missing for one id in 20), so that
// one _id always has one shard key. On a collection sharded on {g, _id}, MongoDB enforces
// _id's uniqueness per shard only: two documents with one _id and different g values on two
// shards are legal there and a duplicate key error on a standalone.
func keyOf(id int) (any, bool) {
	if id%20 == 0 {
		return nil, false
	}
	return id % 10, true
}

func (g *diffGen) doc(id int) bson.D {
	d := bson.D{{Key: "_id", Value: id}}
	if v, ok := keyOf(id); ok {
		d = append(d, bson.E{Key: "g", Value: v})
	}
	d = append(d,
		bson.E{Key: "a", Value: g.rng.IntN(50)},
		bson.E{Key: "b", Value: diffWords[g.rng.IntN(len(diffWords))]},
		bson.E{Key: "n", Value: bson.D{{Key: "d", Value: float64(g.rng.IntN(40)) / 2}}},
	)
	if g.rng.IntN(3) != 0 {
		arr := bson.A{}
		for range g.rng.IntN(4) {
			arr = append(arr, g.rng.IntN(10))
		}
		d = append(d, bson.E{Key: "arr", Value: arr})
	}
	return d
}

// filter is a random predicate on the non-key fields and, sometimes, the key.
func (g *diffGen) filter() bson.D {
	var f bson.D
	switch g.rng.IntN(9) {
	case 0:
		f = bson.D{{Key: "a", Value: bson.D{{Key: "$lt", Value: g.rng.IntN(50)}}}}
	case 1:
		f = bson.D{{Key: "b", Value: diffWords[g.rng.IntN(len(diffWords))]}}
	case 2:
		f = bson.D{{Key: "g", Value: g.rng.IntN(10)}}
	case 3:
		lo := g.rng.IntN(10)
		f = bson.D{{Key: "g", Value: bson.D{{Key: "$gte", Value: lo}, {Key: "$lt", Value: lo + 1 + g.rng.IntN(4)}}}}
	case 4:
		f = bson.D{{Key: "arr", Value: g.rng.IntN(10)}}
	case 5:
		f = bson.D{{Key: "n.d", Value: bson.D{{Key: "$gte", Value: float64(g.rng.IntN(40)) / 2}}}}
	case 6:
		f = bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "g", Value: g.rng.IntN(10)}},
			bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 40}}}},
		}}}
	case 7:
		f = bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{g.id(), g.id(), g.id()}}}}}
	default:
		f = bson.D{}
	}
	if g.rng.IntN(6) == 0 {
		f = append(f, bson.E{Key: "b", Value: bson.D{{Key: "$ne", Value: diffWords[g.rng.IntN(len(diffWords))]}}})
	}
	return f
}

// update is a random update on the non-key fields that cannot fail on any document (a
// failing multi-update stops at a different document on each shard).
func (g *diffGen) update() any {
	switch g.rng.IntN(7) {
	case 0:
		return bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: g.rng.IntN(5) - 2}}}}
	case 1:
		return bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: diffWords[g.rng.IntN(len(diffWords))]}, {Key: "n.d", Value: float64(g.rng.IntN(40)) / 2}}}}
	case 2:
		return bson.D{{Key: "$push", Value: bson.D{{Key: "arr", Value: g.rng.IntN(10)}}}}
	case 3:
		return bson.D{{Key: "$unset", Value: bson.D{{Key: "arr", Value: ""}}}}
	case 4:
		return bson.D{{Key: "$max", Value: bson.D{{Key: "a", Value: g.rng.IntN(50)}}}, {Key: "$addToSet", Value: bson.D{{Key: "tags", Value: diffWords[g.rng.IntN(3)]}}}}
	case 5:
		return mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$add", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$a", 0}}}, 1}}}}}}}}
	default:
		return bson.D{{Key: "$mul", Value: bson.D{{Key: "n.d", Value: 2.0}}}}
	}
}

// next returns the next operation.
func (g *diffGen) next() diffOp {
	switch k := g.rng.IntN(100); {
	case k < 22:
		docs := []any{}
		for range 1 + g.rng.IntN(6) {
			docs = append(docs, g.doc(g.id()))
		}
		ordered := g.rng.IntN(2) == 0
		return diffOp{fmt.Sprintf("insertMany ordered=%v %v", ordered, docs), func(ctx context.Context, c *mongo.Collection) string {
			r, err := c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(ordered))
			n := 0
			if r != nil {
				n = len(r.InsertedIDs)
			}
			return fmt.Sprintf("n=%d %s", n, errShape(err))
		}}
	case k < 32:
		id := g.id()
		f := bson.D{{Key: "_id", Value: id}}
		u := g.update()
		upsert := g.rng.IntN(3) == 0
		if upsert {
			// An upsert's inserted document must have its full shard key from the filter:
			// the id's own (null when it has none).
			v, _ := keyOf(id)
			f = append(f, bson.E{Key: "g", Value: v})
		}
		return diffOp{fmt.Sprintf("updateOne %v %v upsert=%v", f, u, upsert), func(ctx context.Context, c *mongo.Collection) string {
			r, err := c.UpdateOne(ctx, f, u, options.UpdateOne().SetUpsert(upsert))
			return updShape(r, err)
		}}
	case k < 40:
		f, u := g.filter(), g.update()
		return diffOp{fmt.Sprintf("updateMany %v %v", f, u), func(ctx context.Context, c *mongo.Collection) string {
			r, err := c.UpdateMany(ctx, f, u)
			return updShape(r, err)
		}}
	case k < 44:
		id := g.id()
		repl := g.doc(id)[1:] // without _id
		f := bson.D{{Key: "_id", Value: id}}
		if v, ok := lookupD(repl, "g"); ok {
			f = append(f, bson.E{Key: "g", Value: v}) // a replacement keeps its shard key
		} else {
			f = append(f, bson.E{Key: "g", Value: nil})
		}
		return diffOp{fmt.Sprintf("replaceOne %v %v", f, repl), func(ctx context.Context, c *mongo.Collection) string {
			r, err := c.ReplaceOne(ctx, f, repl)
			return updShape(r, err)
		}}
	case k < 48:
		f := bson.D{{Key: "_id", Value: g.id()}}
		return diffOp{fmt.Sprintf("deleteOne %v", f), func(ctx context.Context, c *mongo.Collection) string {
			r, err := c.DeleteOne(ctx, f)
			return delShape(r, err)
		}}
	case k < 50:
		f := g.filter()
		if len(f) == 0 {
			f = bson.D{{Key: "a", Value: g.rng.IntN(50)}}
		}
		return diffOp{fmt.Sprintf("deleteMany %v", f), func(ctx context.Context, c *mongo.Collection) string {
			r, err := c.DeleteMany(ctx, f)
			return delShape(r, err)
		}}
	case k < 54:
		f, u := bson.D{{Key: "_id", Value: g.id()}}, g.update()
		after := g.rng.IntN(2) == 0
		return diffOp{fmt.Sprintf("findOneAndUpdate %v %v after=%v", f, u, after), func(ctx context.Context, c *mongo.Collection) string {
			rd := options.Before
			if after {
				rd = options.After
			}
			raw, err := c.FindOneAndUpdate(ctx, f, u, options.FindOneAndUpdate().SetReturnDocument(rd)).Raw()
			return canon(raw) + " " + errShape(err)
		}}
	case k < 72:
		return g.find()
	case k < 78:
		f := g.filter()
		return diffOp{fmt.Sprintf("countDocuments %v", f), func(ctx context.Context, c *mongo.Collection) string {
			n, err := c.CountDocuments(ctx, f)
			return fmt.Sprintf("%d %s", n, errShape(err))
		}}
	case k < 81:
		f := g.filter()
		return diffOp{fmt.Sprintf("count %v", f), func(ctx context.Context, c *mongo.Collection) string {
			var r struct{ N int64 }
			err := c.Database().RunCommand(ctx, bson.D{{Key: "count", Value: c.Name()}, {Key: "query", Value: f}}).Decode(&r)
			return fmt.Sprintf("%d %s", r.N, errShape(err))
		}}
	case k < 86:
		field := []string{"a", "b", "g", "arr", "n.d"}[g.rng.IntN(5)]
		f := g.filter()
		return diffOp{fmt.Sprintf("distinct %s %v", field, f), func(ctx context.Context, c *mongo.Collection) string {
			r := c.Distinct(ctx, field, f)
			var vals []bson.RawValue
			if err := r.Err(); err != nil {
				return errShape(err)
			}
			raw, err := r.Raw()
			if err != nil {
				return errShape(err)
			}
			arr, _ := raw.Values()
			vals = append(vals, arr...)
			out := make([]string, len(vals))
			for i, v := range vals {
				out[i] = v.String()
			}
			slices.Sort(out)
			return strings.Join(out, ",")
		}}
	default:
		return g.aggregate()
	}
}

// find is a query read through a cursor in small batches: sorted (order compared) or not
// (compared as a multiset).
func (g *diffGen) find() diffOp {
	f := g.filter()
	o := options.Find().SetBatchSize(int32(1 + g.rng.IntN(7)))
	sorted := g.rng.IntN(2) == 0
	desc := fmt.Sprintf("find %v batch", f)
	if sorted {
		sort := [][]bson.E{
			{{Key: "_id", Value: 1}},
			{{Key: "a", Value: -1}, {Key: "_id", Value: 1}},
			{{Key: "g", Value: 1}, {Key: "b", Value: 1}, {Key: "_id", Value: -1}},
			{{Key: "n.d", Value: 1}, {Key: "_id", Value: 1}},
		}[g.rng.IntN(4)]
		o.SetSort(bson.D(sort))
		desc += fmt.Sprintf(" sort %v", sort)
		if g.rng.IntN(2) == 0 {
			skip := int64(g.rng.IntN(10))
			o.SetSkip(skip)
			desc += fmt.Sprintf(" skip %d", skip)
		}
		if g.rng.IntN(2) == 0 {
			lim := int64(1 + g.rng.IntN(30))
			o.SetLimit(lim)
			desc += fmt.Sprintf(" limit %d", lim)
		}
	}
	if g.rng.IntN(3) == 0 {
		o.SetProjection(bson.D{{Key: "a", Value: 1}, {Key: "n", Value: 1}})
		desc += " proj {a, n}"
	}
	return diffOp{desc, func(ctx context.Context, c *mongo.Collection) string {
		cur, err := c.Find(ctx, f, o)
		if err != nil {
			return errShape(err)
		}
		defer cur.Close(ctx)
		var out []string
		for cur.Next(ctx) {
			out = append(out, canon(cur.Current))
		}
		if err := cur.Err(); err != nil {
			return errShape(err)
		}
		if !sorted {
			slices.Sort(out)
		}
		return strings.Join(out, "\n")
	}}
}

// aggregate is a pipeline whose output order is defined by a final $sort on a unique key.
func (g *diffGen) aggregate() diffOp {
	match := bson.D{{Key: "$match", Value: g.filter()}}
	var p mongo.Pipeline
	switch g.rng.IntN(5) {
	case 0:
		p = mongo.Pipeline{match, {{Key: "$group", Value: bson.D{
			{Key: "_id", Value: "$b"},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
			{Key: "s", Value: bson.D{{Key: "$sum", Value: "$a"}}},
			{Key: "lo", Value: bson.D{{Key: "$min", Value: "$n.d"}}},
			{Key: "hi", Value: bson.D{{Key: "$max", Value: "$a"}}},
			{Key: "avg", Value: bson.D{{Key: "$avg", Value: "$a"}}},
		}}}, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}}
	case 1:
		p = mongo.Pipeline{match, {{Key: "$sort", Value: bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: 1}}}},
			{{Key: "$limit", Value: 1 + g.rng.IntN(20)}}, {{Key: "$project", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}}}
	case 2:
		p = mongo.Pipeline{match, {{Key: "$count", Value: "total"}}}
	case 3:
		p = mongo.Pipeline{match, {{Key: "$unwind", Value: "$arr"}}, {{Key: "$group", Value: bson.D{
			{Key: "_id", Value: "$arr"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
		}}}, {{Key: "$sort", Value: bson.D{{Key: "n", Value: -1}, {Key: "_id", Value: 1}}}}}
	default:
		p = mongo.Pipeline{match, {{Key: "$addFields", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$multiply", Value: bson.A{"$a", 2}}}}}}},
			{{Key: "$sort", Value: bson.D{{Key: "x", Value: -1}, {Key: "_id", Value: 1}}}}, {{Key: "$skip", Value: g.rng.IntN(5)}},
			{{Key: "$limit", Value: 25}}}
	}
	bs := int32(1 + g.rng.IntN(10))
	return diffOp{fmt.Sprintf("aggregate %v", p), func(ctx context.Context, c *mongo.Collection) string {
		cur, err := c.Aggregate(ctx, p, options.Aggregate().SetBatchSize(bs))
		if err != nil {
			return errShape(err)
		}
		defer cur.Close(ctx)
		var out []string
		for cur.Next(ctx) {
			out = append(out, canon(cur.Current))
		}
		if err := cur.Err(); err != nil {
			return errShape(err)
		}
		return strings.Join(out, "\n")
	}}
}

func lookupD(d bson.D, k string) (any, bool) {
	for _, e := range d {
		if e.Key == k {
			return e.Value, true
		}
	}
	return nil, false
}

// canon is a document's canonical extended JSON ("" for none).
func canon(raw bson.Raw) string {
	if raw == nil {
		return ""
	}
	b, err := bson.MarshalExtJSON(raw, true, false)
	if err != nil {
		return "!" + err.Error()
	}
	return string(b)
}

// errShape is an error's comparable part: its server codes (bulk write errors per index).
func errShape(err error) string {
	if err == nil {
		return "ok"
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		var parts []string
		for _, we := range bwe.WriteErrors {
			parts = append(parts, fmt.Sprintf("%d@%d", we.Code, we.Index))
		}
		slices.Sort(parts)
		return "bulk[" + strings.Join(parts, " ") + "]"
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		var parts []string
		for _, e := range we.WriteErrors {
			parts = append(parts, fmt.Sprintf("%d@%d", e.Code, e.Index))
		}
		return "write[" + strings.Join(parts, " ") + "]"
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, code := range []int{11000, 2, 9, 14, 28, 40, 52} {
			if se.HasErrorCode(code) {
				return fmt.Sprintf("code %d", code)
			}
		}
	}
	if err == mongo.ErrNoDocuments {
		return "nodocs"
	}
	return "err " + err.Error()
}

func updShape(r *mongo.UpdateResult, err error) string {
	if r == nil {
		return errShape(err)
	}
	return fmt.Sprintf("m=%d u=%d up=%v %s", r.MatchedCount, r.ModifiedCount, r.UpsertedID, errShape(err))
}

func delShape(r *mongo.DeleteResult, err error) string {
	if r == nil {
		return errShape(err)
	}
	return fmt.Sprintf("d=%d %s", r.DeletedCount, errShape(err))
}

// runDifferential runs n generated operations against ref and sut and fails t at the first
// answer that differs, then compares the final contents.
func runDifferential(t *testing.T, ctx context.Context, seed uint64, n int, ref, sut *mongo.Collection, between func(i int)) {
	t.Helper()
	g := &diffGen{rng: rand.New(rand.NewPCG(seed, 12))}
	for i := range n {
		if between != nil {
			between(i)
		}
		op := g.next()
		want, got := op.run(ctx, ref), op.run(ctx, sut)
		if testing.Verbose() && i%250 == 0 {
			t.Logf("operation %d: %s\n→ %.300s", i, op.desc, want)
		}
		if want != got {
			all := g.findAll()
			onlyRef, onlySUT := lineDiff(all.run(ctx, ref), all.run(ctx, sut))
			t.Fatalf("seed %d, operation %d: %s\nreference:\n%s\nsharded:\n%s\ndocuments only in the reference:\n%s\nonly in the sharded cluster:\n%s",
				seed, i, op.desc, want, got, onlyRef, onlySUT)
		}
	}
	all := (&diffGen{}).findAll()
	if want, got := all.run(ctx, ref), all.run(ctx, sut); want != got {
		t.Fatalf("seed %d: final contents differ\nreference:\n%s\nsharded:\n%s", seed, want, got)
	}
}

// findAll reads the whole collection sorted by _id.
func (g *diffGen) findAll() diffOp {
	return diffOp{"find all", func(ctx context.Context, c *mongo.Collection) string {
		cur, err := c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return errShape(err)
		}
		var out []string
		for cur.Next(ctx) {
			out = append(out, canon(cur.Current))
		}
		_ = cur.Close(ctx)
		return strings.Join(out, "\n")
	}}
}

// lineDiff returns the lines only in a and only in b.
func lineDiff(a, b string) (onlyA, onlyB string) {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var as, bs []string
	for l, n := range count {
		for ; n > 0; n-- {
			as = append(as, l)
		}
		for ; n < 0; n++ {
			bs = append(bs, l)
		}
	}
	slices.Sort(as)
	slices.Sort(bs)
	return strings.Join(as, "\n"), strings.Join(bs, "\n")
}
