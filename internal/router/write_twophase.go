package router

// Single updates and deletes without shard key (MongoDB 7.0's updateOne/deleteOne without
// shard key: _clusterQueryWithoutShardKey then _clusterWriteWithoutShardKey, run in an
// internal transaction). A simpler version with the same outcome for the client: phase one
// asks every shard the query can match for one matching document's _id ({find, filter, limit:
// 1, projection: {_id: 1}}, versioned); the first shard (in shard id order) that has one is
// chosen, and phase two sends it the statement with its query narrowed to that document
// ({$and: [q, {_id: <id>}]}). If the document changed in between so that it no longer matches,
// phase one runs again (at most twoPhaseAttempts times; then the statement matched nothing).
// Without MongoDB's transaction a concurrent write may make the chosen document stop matching
// after phase two checked it; the statement still modifies at most one document that matched
// when it was written.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/sharding/catalogcache"
)

// twoPhaseAttempts bounds the phase-one retries of one statement.
const twoPhaseAttempts = 5

// runTwoPhase runs statement t.stmt in two phases; it returns the statement to send again
// after a stale answer, as absorb does.
func (b *writeBatch) runTwoPhase(ctx context.Context, r *catalogcache.Routing, t target) ([]int, error) {
	stmt := b.stmts[t.stmt]
	q, _ := stmt.Lookup("q").DocumentOK()
	for attempt := 0; attempt < twoPhaseAttempts; attempt++ {
		find := b.phaseOneCmd(stmt, q)
		replies := b.c.broadcast(ctx, b.db, t.shards, func(s string) bsoncore.Document { return routedCmd(find, r, s) })
		shard, id := "", bsoncore.Value{}
		for _, sr := range replies {
			if sr.err != nil {
				if b.c.NoteStale(b.ns, sr.err) {
					return []int{t.stmt}, sr.err
				}
				b.setErr(t.stmt, errorDoc(sr.err))
				return nil, nil
			}
			if id.Type != 0 {
				continue
			}
			arr, _ := sr.reply.Lookup("cursor", "firstBatch").ArrayOK()
			if v, err := arr.IndexErr(0); err == nil {
				if d, ok := v.DocumentOK(); ok {
					shard, id = sr.shard, d.Lookup("_id")
				}
			}
		}
		if id.Type == 0 {
			return nil, nil // nothing matches: n stays 0
		}
		before := b.n
		sb := &subBatch{shard: shard, stmts: []int{t.stmt}, rewritten: narrowed(stmt, q, id)}
		b.send(ctx, r, []*subBatch{sb})
		again, stale := b.absorb([]*subBatch{sb}, nil)
		if stale != nil || len(again) > 0 || b.n > before {
			return again, stale
		}
		if _, failed := b.errs[t.stmt]; failed {
			return nil, nil
		}
		// The document no longer matches: look again.
	}
	return nil, nil
}

// phaseOneCmd is {find: coll, filter: q, projection: {_id: 1}, limit: 1, singleBatch: true}
// with the statement's collation and the command's let.
func (b *writeBatch) phaseOneCmd(stmt, q bsoncore.Document) bsoncore.Document {
	idx, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendStringElement(out, "find", b.coll)
	out = bsoncore.AppendDocumentElement(out, "filter", q)
	pidx, out := bsoncore.AppendDocumentElementStart(out, "projection")
	out = bsoncore.AppendInt32Element(out, "_id", 1)
	out, _ = bsoncore.AppendDocumentEnd(out, pidx)
	out = bsoncore.AppendInt64Element(out, "limit", 1)
	out = bsoncore.AppendBooleanElement(out, "singleBatch", true)
	if c, err := stmt.LookupErr("collation"); err == nil {
		out = bsoncore.AppendValueElement(out, "collation", c)
	}
	if l, err := b.cmd.LookupErr("let"); err == nil {
		out = bsoncore.AppendValueElement(out, "let", l)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// narrowed is stmt with its query q replaced by narrowedQuery(q, id).
func narrowed(stmt, q bsoncore.Document, id bsoncore.Value) bsoncore.Document {
	nq := narrowedQuery(q, id)
	sidx, out := bsoncore.AppendDocumentStart(nil)
	elems, _ := stmt.Elements()
	for _, e := range elems {
		if e.Key() == "q" {
			out = bsoncore.AppendDocumentElement(out, "q", nq)
			continue
		}
		out = append(out, e...)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, sidx)
	return out
}

// narrowedQuery is {$and: [q, {_id: id}]}.
func narrowedQuery(q bsoncore.Document, id bsoncore.Value) bsoncore.Document {
	idx, nq := bsoncore.AppendDocumentStart(nil)
	aidx, nq := bsoncore.AppendArrayElementStart(nq, "$and")
	nq = bsoncore.AppendDocumentElement(nq, "0", q)
	didx, nq := bsoncore.AppendDocumentElementStart(nq, "1")
	nq = bsoncore.AppendValueElement(nq, "_id", id)
	nq, _ = bsoncore.AppendDocumentEnd(nq, didx)
	nq, _ = bsoncore.AppendArrayEnd(nq, aidx)
	nq, _ = bsoncore.AppendDocumentEnd(nq, idx)
	return nq
}
