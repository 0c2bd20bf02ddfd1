package router

// The router's write batches (spec: sharding.md "Routing"; MongoDB 7.0's ClusterWriteCmd,
// BatchWriteExec and BatchWriteOp): an insert, update or delete command's statements are
// targeted one by one (write_target.go), grouped into one sub-batch per shard, sent in
// parallel, and the shards' replies merged into one reply with the client's statement
// indexes.
//
// Rounds: an unordered batch sends every pending statement each round; an ordered one only
// the longest prefix whose statements target the same single shard (a statement sent to
// several shards goes alone), so that a statement never runs before an earlier one has. A statement a shard answers with StaleConfig, StaleEpoch or
// StaleDbVersion (as a write error or as the whole sub-batch's error) is pending again: the
// router refreshes what the error names (NoteStale) and retargets only those statements
// (for an ordered sub-batch, the stale statement and the ones after it, which the shard did
// not run), at most maxStaleRetries times. After a statement fails otherwise an ordered batch
// stops; an unordered one goes on.
//
// A statement sent to several shards (a multi update or delete, an _id-equality updateOne)
// that is stale on one of them is sent again to all of them, as MongoDB does: its n may then
// count the other shards' matches twice, and a non-idempotent multi update ($inc) may apply
// twice on the shard that had succeeded (MongoDB has the same caveat for multi writes that
// race with a migration).

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
)

// maxShardBatchBytes bounds the statements of one shard's command: BSONObjMaxUserSize less
// room for the command's other fields (MongoDB's write batches leave the same kind of room).
const maxShardBatchBytes = 16*1024*1024 - 100*1024

type writeKind int

const (
	kindInsert writeKind = iota
	kindUpdate
	kindDelete
)

// arrayKey is the field holding the statements.
func (k writeKind) arrayKey() string { return [...]string{"documents", "updates", "deletes"}[k] }

// name is the command name.
func (k writeKind) name() string { return [...]string{"insert", "update", "delete"}[k] }

// writeBatch is one client write command being executed.
type writeBatch struct {
	c       *Cluster
	kind    writeKind
	ns      string
	db      string
	coll    string
	cmd     bsoncore.Document // the client's command
	ordered bool
	stmts   []bsoncore.Document
	retry   bool // a retryable write (txnNumber)
	// stmtIDs are a retryable write's statement ids (stmtIDsOf), sent with each statement.
	stmtIDs []int32

	n, nModified int64
	upserted     []upsertedID
	errs         map[int]bsoncore.Document // statement index → write error (without index)
	wcErrors     []shardWCError
}

type upsertedID struct {
	index int
	id    bsoncore.Value
}

type shardWCError struct {
	shard string
	doc   bsoncore.Document
}

// target is where one round sends a statement.
type target struct {
	stmt     int
	shards   []string
	twoPhase bool // a single update or delete without shard key (write_twophase.go)
}

// subBatch is one shard's part of a round.
type subBatch struct {
	shard string
	stmts []int // statement indexes, in order
	// rewritten replaces the (single) statement: a two-phase write's second phase.
	rewritten bsoncore.Document
	reply     bsoncore.Document
	err       error
}

// run executes the batch and returns the merged reply.
func (b *writeBatch) run(ctx context.Context) (bsoncore.Document, error) {
	b.errs = map[int]bsoncore.Document{}
	pending := make([]int, len(b.stmts))
	for i := range pending {
		pending[i] = i
	}
	// As ClusterWriteCmd: the database is created (or its creation fails the command)
	// before any statement is targeted.
	if _, err := b.c.ensureDatabase(ctx, b.db); err != nil {
		return nil, err
	}
	staleRounds := 0
	for len(pending) > 0 {
		r, err := b.c.Cache.Routing(ctx, b.ns)
		if err != nil {
			// No routing at all (the database cannot be created, the config server is
			// unreachable): every pending statement fails with it, as MongoDB's batch
			// targeting error.
			b.failAll(pending, err)
			break
		}
		round, rest := b.targetRound(r, pending)
		if len(round) == 0 {
			break
		}
		var again []int
		var stale error
		if round[0].twoPhase {
			again, stale = b.runTwoPhase(ctx, r, round[0])
		} else {
			batches := b.group(round)
			b.send(ctx, r, batches)
			again, stale = b.absorb(batches, round)
		}
		if stale != nil {
			if !txnMayRetryStale(ctx, b.c) {
				// In a transaction a routing error past the first statement ends the
				// statement (and the transaction): mongos raises it as the command's error.
				return nil, stale
			}
			staleRounds++
			if staleRounds > maxStaleRetries {
				b.failAll(again, stale)
				again = nil
			}
		}
		if b.ordered && b.hasErrors() {
			break
		}
		pending = append(again, rest...)
		slices.Sort(pending)
	}
	return b.reply(), nil
}

// failAll records err as the write error of each statement (only the first for an ordered
// batch, which stops there).
func (b *writeBatch) failAll(stmts []int, err error) {
	for _, i := range stmts {
		b.errs[i] = errorDoc(err)
		if b.ordered {
			return
		}
	}
}

func (b *writeBatch) hasErrors() bool { return len(b.errs) > 0 }

// targetRound targets the pending statements of this round. For an ordered batch it stops
// before the first statement whose shards differ from the first statement's; a statement
// that cannot be targeted gets its write error (an ordered batch sends the statements before
// it first, and reports the error only if they all succeed: then it is the first again).
func (b *writeBatch) targetRound(r *catalogcache.Routing, pending []int) (round []target, rest []int) {
	size := map[string]int{} // bytes of statements per shard this round
	for k, i := range pending {
		shards, twoPhase, err := b.targetStmt(r, i)
		if err != nil {
			if b.ordered {
				if len(round) == 0 {
					b.errs[i] = errorDoc(err)
					return nil, nil
				}
				return round, pending[k:]
			}
			b.errs[i] = errorDoc(err)
			continue
		}
		if twoPhase {
			// Runs alone: first the statements before it, then it in its own round.
			if len(round) == 0 {
				return []target{{stmt: i, shards: shards, twoPhase: true}}, pending[k+1:]
			}
			return round, pending[k:]
		}
		if b.ordered && len(shards) > 1 {
			// As BatchWriteOp::targetBatch: an ordered statement sent to several shards goes
			// alone, so that no shard runs statements after one another shard failed.
			if len(round) == 0 {
				return []target{{stmt: i, shards: shards}}, pending[k+1:]
			}
			return round, pending[k:]
		}
		if b.ordered && len(round) > 0 && !slices.Equal(round[0].shards, shards) {
			return round, pending[k:]
		}
		// A shard's command must stay a legal BSON document: statements that would make it
		// larger wait for the next round (as mongos's batch size limits split a batch).
		n := len(b.stmts[i]) + 16
		for _, s := range shards {
			if len(round) > 0 && size[s]+n > maxShardBatchBytes {
				return round, pending[k:]
			}
		}
		for _, s := range shards {
			size[s] += n
		}
		round = append(round, target{stmt: i, shards: shards})
	}
	return round, nil
}

// group makes one sub-batch per shard, statements in index order.
func (b *writeBatch) group(round []target) []*subBatch {
	by := map[string]*subBatch{}
	var out []*subBatch
	for _, t := range round {
		for _, s := range t.shards {
			sb := by[s]
			if sb == nil {
				sb = &subBatch{shard: s}
				by[s] = sb
				out = append(out, sb)
			}
			sb.stmts = append(sb.stmts, t.stmt)
		}
	}
	return out
}

// send runs the sub-batches in parallel and waits for all of them.
func (b *writeBatch) send(ctx context.Context, r *catalogcache.Routing, batches []*subBatch) {
	if len(batches) == 1 {
		// One shard (the common targeted write): no goroutine.
		sb := batches[0]
		sb.reply, sb.err = b.c.runOnRetrying(ctx, b.retry, sb.shard, b.db, routedCmd(b.shardCmd(sb), r, sb.shard))
		return
	}
	var wg sync.WaitGroup
	for _, sb := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb.reply, sb.err = b.c.runOnRetrying(ctx, b.retry, sb.shard, b.db, routedCmd(b.shardCmd(sb), r, sb.shard))
		}()
	}
	wg.Wait()
}

// shardCmd is the sub-batch's command: the client's with only the sub-batch's statements.
func (b *writeBatch) shardCmd(sb *subBatch) bsoncore.Document {
	key := b.kind.arrayKey()
	idx, out := shardCmd(b.kind.name(), bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, b.coll)}, b.cmd, key)
	aidx, out := bsoncore.AppendArrayElementStart(out, key)
	for k, i := range sb.stmts {
		stmt := b.stmts[i]
		if sb.rewritten != nil {
			stmt = sb.rewritten
		}
		out = bsoncore.AppendDocumentElement(out, strconv.Itoa(k), stmt)
	}
	out, _ = bsoncore.AppendArrayEnd(out, aidx)
	out = forwardSession(out, b.cmd)
	if b.stmtIDs != nil {
		aidx, out = bsoncore.AppendArrayElementStart(out, "stmtIds")
		for k, i := range sb.stmts {
			out = bsoncore.AppendInt32Element(out, strconv.Itoa(k), b.stmtIDs[i])
		}
		out, _ = bsoncore.AppendArrayEnd(out, aidx)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// absorb merges the round's replies: counts, upserted ids and write errors with the client's
// indexes. It returns the statements to send again (stale answers) and the last stale error.
func (b *writeBatch) absorb(batches []*subBatch, round []target) (again []int, staleErr error) {
	retry := map[int]bool{}
	for _, sb := range batches {
		if sb.err != nil {
			if b.c.NoteStale(b.ns, sb.err) {
				staleErr = sb.err
				for _, i := range sb.stmts {
					retry[i] = true
				}
				continue
			}
			// The shard did not run the sub-batch: its error is each statement's (the first
			// one's only when ordered, as MongoDB's noteBatchError).
			for _, i := range sb.stmts {
				b.setErr(i, errorDoc(sb.err))
				if b.ordered {
					break
				}
			}
			continue
		}
		reply := sb.reply
		b.n += replyInt(reply, "n")
		b.nModified += replyInt(reply, "nModified")
		if arr, ok := reply.Lookup("upserted").ArrayOK(); ok {
			vals, _ := arr.Values()
			for _, v := range vals {
				d, ok := v.DocumentOK()
				if !ok {
					continue
				}
				k := int(replyInt(d, "index"))
				if k >= 0 && k < len(sb.stmts) {
					b.upserted = append(b.upserted, upsertedID{index: sb.stmts[k], id: d.Lookup("_id")})
				}
			}
		}
		if wce, ok := reply.Lookup("writeConcernError").DocumentOK(); ok {
			b.wcErrors = append(b.wcErrors, shardWCError{shard: sb.shard, doc: wce})
		}
		arr, ok := reply.Lookup("writeErrors").ArrayOK()
		if !ok {
			continue
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			d, ok := v.DocumentOK()
			if !ok {
				continue
			}
			k := int(replyInt(d, "index"))
			if k < 0 || k >= len(sb.stmts) {
				continue
			}
			i := sb.stmts[k]
			if err := writeErrorAsError(d); b.c.NoteStale(b.ns, err) {
				staleErr = err
				retry[i] = true
				if b.ordered {
					// The shard stopped here: the rest of its sub-batch did not run.
					for _, j := range sb.stmts[k+1:] {
						retry[j] = true
					}
				}
				continue
			}
			b.setErr(i, stripFields(d, map[string]bool{"index": true}))
		}
	}
	for i := range retry {
		if _, failed := b.errs[i]; !failed {
			again = append(again, i)
		}
	}
	slices.Sort(again)
	// A statement sent to several shards is pending until none of them is stale.
	return again, staleErr
}

// setErr records a statement's first write error.
func (b *writeBatch) setErr(i int, d bsoncore.Document) {
	if _, ok := b.errs[i]; !ok {
		b.errs[i] = d
	}
}

// reply builds the client's reply: n, nModified (updates), upserted and writeErrors sorted by
// index (an ordered batch reports only its first error), and the merged writeConcernError.
func (b *writeBatch) reply() bsoncore.Document {
	idx, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendInt32Element(out, "n", int32(b.n))
	if b.kind == kindUpdate {
		if len(b.upserted) > 0 {
			slices.SortFunc(b.upserted, func(x, y upsertedID) int { return x.index - y.index })
			aidx, o := bsoncore.AppendArrayElementStart(out, "upserted")
			for k, u := range b.upserted {
				didx, o2 := bsoncore.AppendDocumentElementStart(o, strconv.Itoa(k))
				o2 = bsoncore.AppendInt32Element(o2, "index", int32(u.index))
				o2 = bsoncore.AppendValueElement(o2, "_id", u.id)
				o, _ = bsoncore.AppendDocumentEnd(o2, didx)
			}
			out, _ = bsoncore.AppendArrayEnd(o, aidx)
		}
		out = bsoncore.AppendInt32Element(out, "nModified", int32(b.nModified))
	}
	if len(b.errs) > 0 {
		keys := make([]int, 0, len(b.errs))
		for i := range b.errs {
			keys = append(keys, i)
		}
		slices.Sort(keys)
		if b.ordered {
			keys = keys[:1]
		}
		aidx, o := bsoncore.AppendArrayElementStart(out, "writeErrors")
		for k, i := range keys {
			didx, o2 := bsoncore.AppendDocumentElementStart(o, strconv.Itoa(k))
			o2 = bsoncore.AppendInt32Element(o2, "index", int32(i))
			elems, _ := b.errs[i].Elements()
			for _, e := range elems {
				o2 = append(o2, e...)
			}
			o, _ = bsoncore.AppendDocumentEnd(o2, didx)
		}
		out, _ = bsoncore.AppendArrayEnd(o, aidx)
	}
	// As BatchWriteOp::buildClientResponse: a write concern error is reported when every
	// statement succeeded, or some did in an unordered batch.
	if len(b.wcErrors) > 0 && (len(b.errs) == 0 || (!b.ordered && len(b.errs) < len(b.stmts))) {
		out = bsoncore.AppendDocumentElement(out, "writeConcernError", mergeWCErrors(b.wcErrors))
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// mergeWCErrors is MongoDB 7.0's mergeWriteConcernErrors: one error keeps its code and says
// where it happened ("<CodeName>: <reason> at <shard>"); several become WriteConcernFailed
// "Multiple errors reported :: ... :: and :: ...".
func mergeWCErrors(errs []shardWCError) bsoncore.Document {
	msg := ""
	code := mongoerr.Code(replyInt(errs[0].doc, "code"))
	if len(errs) > 1 {
		msg = "Multiple errors reported :: "
		code = mongoerr.WriteConcernFailed
	}
	var info bsoncore.Value
	for k, e := range errs {
		if k > 0 {
			msg += " :: and :: "
		}
		c := mongoerr.Code(replyInt(e.doc, "code"))
		m, _ := e.doc.Lookup("errmsg").StringValueOK()
		msg += c.Name() + ": " + m + " at " + e.shard
		if k == 0 {
			info = e.doc.Lookup("errInfo")
		}
	}
	idx, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendInt32Element(out, "code", int32(code))
	out = bsoncore.AppendStringElement(out, "codeName", code.Name())
	out = bsoncore.AppendStringElement(out, "errmsg", msg)
	if len(errs) == 1 && info.Type == bsoncore.TypeEmbeddedDocument {
		out = bsoncore.AppendValueElement(out, "errInfo", info)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// errorDoc is err as a write error's fields: {code, codeName, errmsg, <extra info>}.
func errorDoc(err error) bsoncore.Document {
	me, ok := mongoerr.As(err)
	if !ok {
		me = &mongoerr.Error{Code: mongoerr.InternalError, Msg: err.Error()}
	}
	msg := me.Msg
	if msg == "" && me.Err != nil {
		msg = me.Err.Error()
	}
	idx, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendInt32Element(out, "code", int32(me.Code))
	out = bsoncore.AppendStringElement(out, "codeName", me.Code.Name())
	out = bsoncore.AppendStringElement(out, "errmsg", msg)
	if info, ok := me.Info.(bsoncore.Document); ok {
		elems, _ := info.Elements()
		for _, e := range elems {
			switch e.Key() {
			case "code", "codeName", "errmsg", "index":
			default:
				out = append(out, e...)
			}
		}
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// writeErrorAsError is a shard's write error as an error carrying its fields (so NoteStale
// reads a stale error's ns and versions from errInfo).
func writeErrorAsError(d bsoncore.Document) error {
	code := mongoerr.Code(replyInt(d, "code"))
	msg, _ := d.Lookup("errmsg").StringValueOK()
	info := d
	if ei, ok := d.Lookup("errInfo").DocumentOK(); ok {
		info = ei
	}
	return mongoerr.New(code, msg).WithInfo(info)
}

// intField reads a numeric field (int32, int64 or double); 0 when absent.
func replyInt(d bsoncore.Document, key string) int64 {
	v := d.Lookup(key)
	switch v.Type {
	case bsoncore.TypeInt32:
		return int64(v.Int32())
	case bsoncore.TypeInt64:
		return v.Int64()
	case bsoncore.TypeDouble:
		return int64(v.Double())
	}
	return 0
}
