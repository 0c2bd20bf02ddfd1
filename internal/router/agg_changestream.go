package router

// Change streams through the router (MongoDB's mongos change stream: cluster_aggregate's
// change stream path, document_source_change_stream_handle_topology_change, and the
// AsyncResultsMerger in tailable awaitData mode merging on `_id._data` with
// getMinPromisedSortKey): an aggregate led by $changeStream on a collection, a database
// (aggregate: 1) or the cluster (allChangesForCluster on admin) opens the stream on every
// shard in the shard registry (a database's collections move with movePrimary and chunks
// migrate, so any shard may produce its events) and merges the shards' streams in resume
// token order on the router. The user's stages after $changeStream run on the router, after
// the merge.
//
// Start point. Without a resume option each shard starts at the router's cluster time plus
// one increment (mongos's getStartTimeForNewStream), so every shard starts at the same
// point. startAtOperationTime, a high-water-mark token and an invalidate's token go to the
// shards as given. An event's token (resumeAfter/startAfter) names an event that only one
// shard holds, so the shards are asked to start at its clusterTime instead and the router
// skips the events up to it, failing with ChangeStreamFatalError when the first event past
// it comes before the event itself was seen (MongoDB also checks resume token presence on
// mongos, after the merge, and only resumability on the shards).
//
// The merge rule (csMerge): every shard reply carries a postBatchResumeToken (PBRT), the
// promise that the shard will produce nothing smaller. The router returns the smallest
// buffered event E only when every shard with nothing buffered has a PBRT ≥ E's `_id._data`;
// `_data` strings sort in resume token order (cluster time first), so no decoding is needed.
// A getMore asks the shards that block the merge (those with empty buffers; all when none
// holds anything) concurrently, each awaiting the client's await time, and returns as soon
// as the merge yields events, or an empty batch when the time is up. Every reply carries a
// PBRT the client can resume from: the last consumed event's token while events are
// buffered past it, else the smallest shard PBRT (never below that event's token).
//
// A shard added after the stream opened is watched from the next getMore that finds it in
// the registry (which reloads when a gossiped topologyTime says the shards changed): its
// stream starts at the later of the stream's start and the shard's addition (its
// topologyTime), before any chunk can have moved to it, where MongoDB reacts to the config
// server's kNewShardDetected event. Explain shows the split (the shards' part, the merge and
// the router's stages) and each shard's explain. Known deviation: the shards' streams are
// opened unversioned.
//
// fullDocument: updateLookup is served on the router, as mongos does: the shards send plain
// update events and the router reads each update's document through its routing by
// documentKey (majority), since after a migration the shard
// that logged the update may no longer own the document.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/changestream"
	"humongo/internal/changestream/resumetoken"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/service"
	"humongo/internal/vclock"
)

// csAwaitDefault is how long a change stream getMore waits without maxTimeMS (mongod's and
// mongos's default await time of a tailable awaitData cursor).
const csAwaitDefault = time.Second

// csAwaitMargin is kept from the client's await time for the shards' replies to travel
// back and the router's own reply to leave before the client's deadline.
const csAwaitMargin = 50 * time.Millisecond

// csShardSlack bounds how long after its await time a shard's getMore may take to answer
// before the router gives up on it (and on the stream: the events it may have sent are
// lost with the reply).
const csShardSlack = 10 * time.Second

// csAllowedStages are the stages a change stream's pipeline may hold after $changeStream
// (DocumentSource constraints' isAllowedInChangeStream), as on a shard.
var csAllowedStages = map[string]bool{
	"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$redact": true,
}

// isChangeStreamCmd reports whether an aggregate's pipeline starts with $changeStream.
func isChangeStreamCmd(cmd bsoncore.Document) bool {
	arr, ok := cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return false
	}
	v, err := arr.IndexErr(0)
	if err != nil {
		return false
	}
	d, ok := v.DocumentOK()
	if !ok {
		return false
	}
	name, _ := stageName(d)
	return name == "$changeStream"
}

// csRequest is a parsed change stream aggregate.
type csRequest struct {
	db, coll string // coll "" for a database or cluster stream
	ns       string // the cursor's namespace ("db.$cmd.aggregate" without a collection)
	specDoc  bsoncore.Document
	spec     *changestream.Spec
	rest     []bsoncore.Document // the user's stages after $changeStream
	count    int64               // the first batch's size
	// split: the pipeline ends with $changeStreamSplitLargeEvent. The shards then run the
	// user's stages and the split (and updateLookup) themselves and the router merges the
	// fragments, whose tokens sort within their event.
	split bool
}

// csSplitStage ends a change stream pipeline whose large events come as fragments.
const csSplitStage = "$changeStreamSplitLargeEvent"

// parseChangeStream parses and checks a change stream aggregate (its namespace, the spec
// with MongoDB's legality checks for a router, and the user's stages).
func parseChangeStream(env *service.Env, cmd bsoncore.Document) (*csRequest, error) {
	r := &csRequest{db: env.DB, count: cursor.DefaultFirstBatch}
	switch v := firstArg(cmd); v.Type {
	case bsoncore.TypeString:
		ns, err := collectionArg(env, cmd)
		if err != nil {
			return nil, err
		}
		r.ns, r.coll = ns, ns[len(env.DB)+1:]
	default:
		if n, ok := v.AsInt64OK(); !ok || n != 1 {
			return nil, mongoerr.Newf(mongoerr.FailedToParse,
				"Invalid command format: the 'aggregate' field must specify a collection name or 1")
		}
		r.ns = env.DB + ".$cmd.aggregate"
	}
	arr, _ := cmd.Lookup("pipeline").ArrayOK()
	stages, err := pipelineDocs(arr)
	if err != nil {
		return nil, err
	}
	cur, ok := cmd.Lookup("cursor").DocumentOK()
	if !ok {
		if ex, _ := cmd.Lookup("explain").BooleanOK(); !ex {
			return nil, mongoerr.New(mongoerr.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
		}
	}
	if n, ok := cur.Lookup("batchSize").AsInt64OK(); ok {
		if n < 0 {
			return nil, mongoerr.Newf(mongoerr.Location51024, "BSON field 'batchSize' value must be >= 0, actual value '%d'", n)
		}
		r.count = n
	}
	_, v := stageName(stages[0])
	if r.spec, err = changestream.ParseSpec(v); err != nil {
		return nil, err
	}
	r.specDoc, _ = v.DocumentOK()
	if err := r.spec.Check(r.db, r.coll, true); err != nil {
		return nil, err
	}
	r.rest = stages[1:]
	for i, st := range r.rest {
		switch name, v := stageName(st); name {
		case "$changeStream":
			return nil, mongoerr.New(mongoerr.Location40602, "$changeStream is only valid as the first stage in a pipeline")
		case csSplitStage:
			if d, ok := v.DocumentOK(); !ok || len(d) != 5 {
				return nil, mongoerr.New(mongoerr.Location7182800, "$changeStreamSplitLargeEvent spec should be an empty object")
			}
			if i != len(r.rest)-1 {
				return nil, mongoerr.New(mongoerr.Location7182802, "$changeStreamSplitLargeEvent must be the last stage in the pipeline")
			}
			r.split = true
		}
	}
	return r, nil
}

// userPipeline parses the user's stages after $changeStream (nil: none) and checks each
// may run in a stream.
func (r *csRequest) userPipeline(cmd bsoncore.Document) (*agg.Pipeline, error) {
	rest := r.rest
	if r.split {
		rest = rest[:len(rest)-1]
	}
	if len(rest) == 0 {
		return nil, nil
	}
	coll, _, err := readCollation("aggregate", cmd)
	if err != nil {
		return nil, err
	}
	pl, err := agg.Parse(rest, agg.ParseContext{DB: r.db, Collator: coll})
	if err != nil {
		return nil, err
	}
	for _, st := range rest {
		if name, _ := stageName(st); !csAllowedStages[name] {
			return nil, mongoerr.Newf(mongoerr.IllegalOperation, "%s is not permitted in a $changeStream pipeline", name)
		}
	}
	if r.split {
		return nil, nil // checked here, run by the shards before their split
	}
	return pl, nil
}

// shardAggregate starts the shards' aggregate of the stream: {aggregate: coll or 1,
// pipeline: shardPipeline(stage)}.
func (r *csRequest) shardAggregate(stage bsoncore.Document) *bsoncore.DocumentBuilder {
	b := bsoncore.NewDocumentBuilder()
	if r.coll != "" {
		b.AppendString("aggregate", r.coll)
	} else {
		b.AppendInt32("aggregate", 1)
	}
	return b.AppendArray("pipeline", pipelineArray(r.shardPipeline(stage)))
}

// shardPipeline is the pipeline the shards run: stage, then, with the split stage, the
// user's stages and the split.
func (r *csRequest) shardPipeline(stage bsoncore.Document) []bsoncore.Document {
	if !r.split {
		return []bsoncore.Document{stage}
	}
	out := make([]bsoncore.Document, 0, 1+len(r.rest))
	out = append(out, stage)
	for _, st := range r.rest {
		out = append(out, append(bsoncore.Document(nil), st...))
	}
	return out
}

// shardStage is the $changeStream stage the shards get, and the router's resume point:
// resume is the `_data` of an event token the router must find (""), start the token the
// stream stands at before its first event.
func (r *csRequest) shardStage(clusterTime optime.Timestamp) (stage bsoncore.Document, resume string, start bsoncore.Document, err error) {
	drop := map[string]bool{"$_generateV2ResumeTokens": true}
	if r.spec.FullDocument == changestream.FullDocUpdateLookup && !r.split {
		// The router looks the documents up through its routing (csSource.lookup): the
		// shard that logged an update may not own the document any more. (With the split
		// stage the shards look up before they split.)
		drop["fullDocument"] = true
	}
	var startAt optime.Timestamp
	switch tok := r.spec.ResumeToken(); {
	case tok != nil && !tok.IsHighWaterMark() && !tok.FromInvalidate:
		// An event: every shard starts at its time, the router finds the event.
		drop["resumeAfter"], drop["startAfter"] = true, true
		startAt = tok.ClusterTime
		start = resumetoken.Encode(*tok)
		resume, _ = tokenData(start)
	case tok != nil:
		start = resumetoken.Encode(*tok)
	case r.spec.StartAtOperationTime != 0:
		start = resumetoken.Encode(resumetoken.HighWaterMarkAt(r.spec.StartAtOperationTime))
	case clusterTime != 0:
		startAt = clusterTime + 1
		start = resumetoken.Encode(resumetoken.HighWaterMarkAt(startAt))
	}
	idx, b := bsoncore.AppendDocumentStart(nil)
	els, err := r.specDoc.Elements()
	if err != nil {
		return nil, "", nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid $changeStream stage: %v", err)
	}
	for _, el := range els {
		if !drop[el.Key()] {
			b = append(b, el...)
		}
	}
	if startAt != 0 {
		b = bsoncore.AppendTimestampElement(b, "startAtOperationTime", startAt.Secs(), startAt.Inc())
	}
	b = bsoncore.AppendBooleanElement(b, "$_generateV2ResumeTokens", true)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return bsoncore.NewDocumentBuilder().AppendDocument("$changeStream", b).Build(), resume, start, nil
}

// shardStageAt is the $changeStream stage for a shard added after the stream opened: the
// user's options without a resume point, starting at at.
func (r *csRequest) shardStageAt(at optime.Timestamp) (bsoncore.Document, error) {
	drop := map[string]bool{"$_generateV2ResumeTokens": true, "resumeAfter": true, "startAfter": true, "startAtOperationTime": true}
	if r.spec.FullDocument == changestream.FullDocUpdateLookup && !r.split {
		drop["fullDocument"] = true
	}
	els, err := r.specDoc.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid $changeStream stage: %v", err)
	}
	idx, b := bsoncore.AppendDocumentStart(nil)
	for _, el := range els {
		if !drop[el.Key()] {
			b = append(b, el...)
		}
	}
	b = bsoncore.AppendTimestampElement(b, "startAtOperationTime", at.Secs(), at.Inc())
	b = bsoncore.AppendBooleanElement(b, "$_generateV2ResumeTokens", true)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return bsoncore.NewDocumentBuilder().AppendDocument("$changeStream", b).Build(), nil
}

// tokenData is the `_data` of a resume token document.
func tokenData(tok bsoncore.Document) (string, bool) {
	return tok.Lookup("_data").StringValueOK()
}

// runChangeStream opens a change stream on every shard and answers with the merge's first
// batch (what the shards' first batches allow; it does not wait).
func runChangeStream(ctx context.Context, c *Cluster, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	r, err := parseChangeStream(env, cmd)
	if err != nil {
		return nil, err
	}
	if inTxn(cmd) {
		return nil, mongoerr.New(mongoerr.OperationNotSupportedInTransaction,
			"Operation not permitted in transaction :: caused by :: $changeStream is not permitted in a multi-document transaction")
	}
	pl, err := r.userPipeline(cmd)
	if err != nil {
		return nil, err
	}
	if ex, _ := cmd.Lookup("explain").BooleanOK(); ex {
		return explainChangeStream(ctx, c, env, r)
	}
	all, err := c.Shards.All(ctx)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, mongoerr.New(mongoerr.ShardNotFound, "no shards found")
	}
	now := env.State.Concern.Clock.ClusterTime()
	stage, resume, start, err := r.shardStage(now)
	if err != nil {
		return nil, err
	}
	// The stream outlives cmd's buffer (new shards are opened at later getMores): what it
	// needs of cmd is copied.
	r.specDoc = append(bsoncore.Document(nil), r.specDoc...)
	for i, st := range r.rest {
		r.rest[i] = append(bsoncore.Document(nil), st...)
	}
	var collation bsoncore.Value
	if v, err := cmd.LookupErr("collation"); err == nil {
		collation = bsoncore.Value{Type: v.Type, Data: append([]byte(nil), v.Data...)}
	}
	shardCmd := func(stage bsoncore.Document, now optime.Timestamp) bsoncore.Document {
		b := r.shardAggregate(stage).AppendDocument("cursor", bsoncore.NewDocumentBuilder().Build())
		if collation.Type != 0 {
			b.AppendValue("collation", collation)
		}
		// The router's cluster time goes to every shard with the stream's opening (the
		// shard takes the highest $clusterTime it is sent; the driver gossips only what
		// this shard's client has seen): a shard whose clock lags would otherwise log a
		// write acknowledged after the stream opened below its start, and the stream
		// would miss it.
		return withClusterTime(b.Build(), now)
	}
	sc := shardCmd(stage, now)
	shards := make([]string, len(all))
	cmds := make(map[string]bsoncore.Document, len(all))
	for i, s := range all {
		shards[i], cmds[s.ID] = s.ID, sc
	}
	cursors, err := openCursors(ctx, c, r.db, shards, cmds)
	if err != nil {
		return nil, changestream.ResumableError(err)
	}
	src := &csSource{resume: resume, pos: start, pipeline: pl, aggCtx: &agg.Context{}}
	if r.spec.FullDocument == changestream.FullDocUpdateLookup && !r.split {
		lookupColl, _ := collation.DocumentOK() // the copy: getMores look up after cmd is gone
		src.lookup = func(ctx context.Context, ev bsoncore.Document) (bsoncore.Document, error) {
			return csLookup(ctx, c, lookupColl, ev)
		}
	}
	clock := env.State.Concern.Clock.ClusterTime
	for _, sc := range cursors {
		if _, err := src.addQueue(sc, clock); err != nil {
			src.Close()
			return nil, err
		}
	}
	// Shards added later are watched from their addition on (package comment).
	src.watched = map[string]bool{}
	for _, s := range all {
		src.watched[s.ID] = true
	}
	startTS := now + 1
	if start != nil {
		if d, err := resumetoken.Decode(start); err == nil {
			startTS = d.ClusterTime
		}
	}
	src.newShards = func(ctx context.Context) error {
		all, err := c.Shards.All(ctx)
		if err != nil {
			return nil // the registry is unreachable: look again next time
		}
		for _, sh := range all {
			if src.watched[sh.ID] {
				continue
			}
			at := max(startTS, optime.Timestamp(uint64(sh.TopologyTime.T)<<32|uint64(sh.TopologyTime.I)))
			stage, err := r.shardStageAt(at)
			if err != nil {
				return err
			}
			cur, err := openCursors(ctx, c, r.db, []string{sh.ID}, map[string]bsoncore.Document{sh.ID: shardCmd(stage, clock())})
			if err != nil {
				return fmt.Errorf("watch the new shard %s: %w", sh.ID, err)
			}
			if _, err := src.addQueue(cur[0], clock); err != nil {
				return err
			}
			src.watched[sh.ID] = true
		}
		return nil
	}
	b, err := src.fill(ctx, r.count, 0)
	if err != nil {
		src.Close()
		return nil, changestream.ResumableError(err)
	}
	var id int64
	if src.done {
		src.Close()
	} else {
		cur := &cursor.Cursor{NS: r.ns, Source: src, Tailable: true, AwaitData: true,
			LSID: routerCursorKey(cmd), Command: append(bsoncore.Document(nil), cmd...), Users: env.Auth.Users()}
		cur.NReturned = int64(b.Len())
		id = env.State.Cursors().Register(cur)
	}
	env.State.Counters.DocsReturned.Add(int64(b.Len()))
	return cursor.AppendReply(b, id, r.ns, cursor.ReplyOptions{First: true, BatchBeforeID: true,
		PostBatchResumeToken: src.postBatchResumeToken()}), nil
}

// csGetMore serves a getMore on a change stream's router cursor (pinned by the caller):
// await is the client's maxTimeMS (the driver's maxAwaitTimeMS), csAwaitDefault without one.
func csGetMore(ctx context.Context, c *cursor.Cursor, src *csSource, count int64, batchSize int64) (*cursor.Batch, error) {
	await := csAwaitDefault
	if dl, ok := ctx.Deadline(); ok {
		await = time.Until(dl) - csAwaitMargin
	}
	src.batchSize = batchSize
	b, err := src.fill(ctx, count, max(await, 0))
	if err != nil {
		return nil, changestream.ResumableError(err)
	}
	c.NReturned += int64(b.Len())
	return b, nil
}

// csEvent is one buffered event and its token's `_data`.
type csEvent struct {
	data string
	doc  bsoncore.Document
}

// csReply is one shard reply as the merge takes it.
type csReply struct {
	docs []bsoncore.Document
	pbrt bsoncore.Document // the shard's postBatchResumeToken
	open bool              // the shard's cursor is still open
}

// csShard is one shard's stream: the real one (csRemote) or a test's.
type csShard interface {
	// more runs one getMore that waits at most await for events.
	more(ctx context.Context, batchSize int64, await time.Duration) (csReply, error)
	// kill kills the shard's cursor (best effort) and releases its session.
	kill()
}

// csQueue is what the router holds of one shard's stream.
type csQueue struct {
	shard csShard
	buf   []csEvent
	// pbrt is the shard's latest postBatchResumeToken and pbrtData its `_data`: the shard
	// will produce nothing smaller.
	pbrt     bsoncore.Document
	pbrtData string
	// open: the shard's cursor is open. A closed shard with nothing buffered holds up no
	// event (it was invalidated, or failed and the stream ends).
	open bool
}

// add buffers a reply's events and takes its PBRT. A malformed event (no `_id._data`) is
// an error: the merge cannot place it.
func (q *csQueue) add(docs []bsoncore.Document, pbrt bsoncore.Document) error {
	for _, d := range docs {
		id, ok := d.Lookup("_id").DocumentOK()
		data, ok2 := tokenData(id)
		if !ok || !ok2 {
			return mongoerr.New(mongoerr.ChangeStreamFatalError, "a shard's change event has no resume token in _id._data")
		}
		q.buf = append(q.buf, csEvent{data: data, doc: d})
	}
	if data, ok := tokenData(pbrt); ok && data > q.pbrtData {
		q.pbrt, q.pbrtData = pbrt, data
	}
	return nil
}

// csMerge is the merge rule over the shards' queues: pure (no IO, no time), so a test can
// drive it with made-up replies.
type csMerge struct {
	qs []*csQueue
}

// next returns the queue whose first event is the next in the merged stream, or -1 when
// none may be returned yet: the smallest buffered event E goes out only when every open
// shard with nothing buffered promised (by its PBRT) nothing smaller than E. Ties go to
// the earlier shard.
func (m *csMerge) next() int {
	best := -1
	for i, q := range m.qs {
		if len(q.buf) > 0 && (best < 0 || q.buf[0].data < m.qs[best].buf[0].data) {
			best = i
		}
	}
	if best < 0 {
		return -1
	}
	head := m.qs[best].buf[0].data
	for _, q := range m.qs {
		if len(q.buf) == 0 && q.open && q.pbrtData < head {
			return -1
		}
	}
	return best
}

// starved lists the queues whose getMore can let the merge go on: the open ones with
// nothing buffered whose PBRT is below the smallest buffered event (every open one with
// nothing buffered when nothing is buffered).
func (m *csMerge) starved() []int {
	head := ""
	for _, q := range m.qs {
		if len(q.buf) > 0 && (head == "" || q.buf[0].data < head) {
			head = q.buf[0].data
		}
	}
	var out []int
	for i, q := range m.qs {
		if len(q.buf) == 0 && q.open && (head == "" || q.pbrtData < head) {
			out = append(out, i)
		}
	}
	return out
}

// buffered reports whether any shard's event waits on the router.
func (m *csMerge) buffered() bool {
	for _, q := range m.qs {
		if len(q.buf) > 0 {
			return true
		}
	}
	return false
}

// minPBRT is the smallest PBRT of the open shards (nil when none is open): the point below
// which no shard can produce an event any more.
func (m *csMerge) minPBRT() (bsoncore.Document, string) {
	var doc bsoncore.Document
	min, found := "", false
	for _, q := range m.qs {
		if q.open && (!found || q.pbrtData < min) {
			doc, min, found = q.pbrt, q.pbrtData, true
		}
	}
	return doc, min
}

// csSource is a change stream's router cursor source: the merge, the router's resume check
// and the user's pipeline. Its getMores go through csGetMore (fill), not cursor.FillBatch.
type csSource struct {
	m csMerge
	// resume is the `_data` of the event the stream resumes after ("" once found, or
	// none): events up to it are skipped, and the first event past it must be it.
	resume string
	// last is the `_data` of the last event consumed (returned or dropped by the pipeline);
	// pos is the token the client resumes from when nothing is buffered past it.
	last string
	pos  bsoncore.Document
	// unread is an event that did not fit its batch (returned first next time); unreadPos is
	// the position before it.
	unread    bsoncore.Document
	unreadPos bsoncore.Document
	pipeline  *agg.Pipeline
	aggCtx    *agg.Context
	// lookup returns an update event with its document's current version as fullDocument
	// (fullDocument: updateLookup; nil otherwise).
	lookup    func(ctx context.Context, ev bsoncore.Document) (bsoncore.Document, error)
	batchSize int64 // the shards' getMore batchSize (0: their default)
	// done: the stream returned its invalidate event (or nothing can come any more).
	done bool
	// watched are the shards with a queue; newShards, when set, opens the stream on shards
	// added since (called at each fill).
	watched   map[string]bool
	newShards func(ctx context.Context) error
}

// addQueue adds a shard's freshly opened stream to the merge, with its first batch.
func (s *csSource) addQueue(sc *shardCursor, clock func() optime.Timestamp) (*csQueue, error) {
	q := &csQueue{shard: &csRemote{sc: sc, clock: clock}, open: sc.id != 0}
	s.m.qs = append(s.m.qs, q)
	first := sc.buf
	sc.buf = nil
	return q, q.add(first, sc.pbrt)
}

// fill returns up to count merged events, asking the shards that hold the merge up (each
// waiting up to await; 0 asks none) until events come or await is spent.
func (s *csSource) fill(ctx context.Context, count int64, await time.Duration) (*cursor.Batch, error) {
	b := &cursor.Batch{}
	deadline := time.Now().Add(await)
	if s.newShards != nil && !s.done {
		if err := s.newShards(ctx); err != nil {
			return b, err
		}
	}
	for {
		for !s.done && int64(b.Len()) < count {
			d, ok, err := s.nextEvent(ctx)
			if err != nil {
				return b, err
			}
			if !ok {
				break
			}
			if !b.Add(d) {
				s.unread, s.unreadPos, s.pos = d, s.pos, s.unreadPos
				break
			}
		}
		left := time.Until(deadline)
		if b.Len() > 0 || s.done || count == 0 || await <= 0 || left <= 0 {
			return b, nil
		}
		starved := s.m.starved()
		if len(starved) == 0 {
			// Nothing open is holding the merge up: the shards' cursors all ended.
			s.done = !s.m.buffered()
			return b, nil
		}
		if err := s.fetch(ctx, starved, left); err != nil {
			return b, err
		}
	}
}

// nextEvent returns the next event of the merged stream after the resume check and the
// user's pipeline; ok false when the merge must wait for a shard.
func (s *csSource) nextEvent(ctx context.Context) (bsoncore.Document, bool, error) {
	if s.unread != nil {
		d := s.unread
		s.unread, s.unreadPos = nil, nil
		s.pos = d.Lookup("_id").Document()
		return d, true, nil
	}
	for {
		i := s.m.next()
		if i < 0 {
			return nil, false, nil
		}
		q := s.m.qs[i]
		ev := q.buf[0]
		q.buf = q.buf[1:]
		if ev.data <= s.last {
			continue // another shard's copy of an event returned already (an invalidate)
		}
		id := ev.doc.Lookup("_id").Document()
		if s.resume != "" {
			switch {
			case ev.data < s.resume:
				continue
			case ev.data == s.resume:
				s.resume, s.last = "", ev.data
				continue
			default:
				return nil, false, changestream.ResumeTokenNotFound(id)
			}
		}
		s.last = ev.data
		prev := s.pos
		s.pos = id
		doc := ev.doc
		switch t, _ := doc.Lookup("operationType").StringValueOK(); {
		case t == "invalidate":
			s.done = true
		case t == "update" && s.lookup != nil:
			// Past the client's await time too: the event is taken off its queue already.
			lctx, cancel := csDetach(ctx, csShardSlack)
			var err error
			doc, err = s.lookup(lctx, doc)
			cancel()
			if err != nil {
				return nil, false, err
			}
		}
		out, err := s.runPipeline(ctx, doc)
		if err != nil {
			return nil, false, err
		}
		if out != nil {
			s.unreadPos = prev
			return out, true, nil
		}
		if s.done {
			return nil, false, nil
		}
	}
}

// runPipeline runs the user's stages over one event: nil when they drop it.
func (s *csSource) runPipeline(ctx context.Context, d bsoncore.Document) (bsoncore.Document, error) {
	if s.pipeline == nil {
		return d, nil
	}
	out, err := s.pipeline.Run(ctx, agg.SliceSource([]bsoncore.Document{d}), s.aggCtx)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	r, ok, err := out.Next(ctx)
	if err != nil || !ok {
		return nil, err
	}
	if err := changestream.CheckUnmodifiedID(d, r); err != nil {
		return nil, err
	}
	return append(bsoncore.Document(nil), r...), nil
}

// fetch sends getMores to the shards idx concurrently, each waiting up to await, and buffers
// what they answer. The goroutines end before it returns. The router's own deadline (the
// client's await time) does not cut a shard's getMore short: a reply thrown away could hold
// events; the shard answers by itself at its maxTimeMS. Cancellation (a killed operation or
// a closed connection) does, and then the stream fails.
func (s *csSource) fetch(ctx context.Context, idx []int, await time.Duration) error {
	sctx, cancel := csDetach(ctx, await+csShardSlack)
	defer cancel()
	replies := make([]csReply, len(idx))
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for j, i := range idx {
		wg.Go(func() { replies[j], errs[j] = s.m.qs[i].shard.more(sctx, s.batchSize, await) })
	}
	wg.Wait()
	var first error
	for j, i := range idx {
		q := s.m.qs[i]
		if errs[j] != nil {
			q.open = false
			if first == nil {
				first = errs[j]
			}
			continue
		}
		q.open = replies[j].open
		if err := q.add(replies[j].docs, replies[j].pbrt); err != nil && first == nil {
			first = err
		}
	}
	if first == nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		first = context.Cause(ctx)
	}
	return first
}

// csDetach returns a context for the shard requests of a change stream getMore: without
// the request's deadline (the client's await time, which must not cut a request whose reply
// holds events), bounded by timeout instead, and cancelled when the request is (killOp, a
// closed connection).
func csDetach(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return dctx, func() { stop(); cancel() }
}

// postBatchResumeToken is the token a client resumes from after what was returned: the
// last consumed event's while events wait past it, else the smallest shard PBRT when it is
// past that event.
func (s *csSource) postBatchResumeToken() bsoncore.Document {
	if s.unread != nil || s.m.buffered() || s.done || s.resume != "" {
		return s.pos
	}
	min, data := s.m.minPBRT()
	if min != nil {
		if posData, _ := tokenData(s.pos); s.pos == nil || data > posData {
			return min
		}
	}
	return s.pos
}

// Next implements cursor.Source for the cursor manager's sake; getMores fill batches with
// fill, which waits.
func (s *csSource) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if s.done && s.unread == nil {
		return nil, false, nil
	}
	return s.nextEvent(ctx)
}

// SaveState implements cursor.Source.
func (s *csSource) SaveState() {}

// RestoreState implements cursor.Source.
func (s *csSource) RestoreState(context.Context) error { return nil }

// Close implements cursor.Source: kills the shards' cursors (in parallel: each may be a
// round trip) and ends their sessions.
func (s *csSource) Close() {
	var wg sync.WaitGroup
	for _, q := range s.m.qs {
		wg.Go(q.shard.kill)
	}
	wg.Wait()
	s.m.qs = nil
}

// exhausted implements routerSource: the stream ended with its invalidate.
func (s *csSource) exhausted() bool { return s.done && s.unread == nil }

// setBatchSize implements routerSource.
func (s *csSource) setBatchSize(n int64) { s.batchSize = n }

// csLookup returns an update event with fullDocument, the majority-committed version of its
// document read through the router by documentKey (null when there is none), as mongos's
// DocumentSourceLookupChangePostImage. Unlike mongos it sends no afterClusterTime: the
// update is majority-committed on its shard already (streams read no further), a migration
// carries it to a new owner before that owner serves the range, and a shard whose clock is
// behind the event's time would wait for its next write (its periodic no-op) to answer.
func csLookup(ctx context.Context, c *Cluster, collation bsoncore.Document, ev bsoncore.Document) (bsoncore.Document, error) {
	db, _ := ev.Lookup("ns", "db").StringValueOK()
	coll, _ := ev.Lookup("ns", "coll").StringValueOK()
	key, ok := ev.Lookup("documentKey").DocumentOK()
	if !ok || db == "" || coll == "" {
		return nil, mongoerr.New(mongoerr.ChangeStreamFatalError, "an update event without ns or documentKey cannot look its document up")
	}
	rc := bsoncore.NewDocumentBuilder().AppendString("level", "majority").Build()
	rr := &routerResolver{c: c, collation: collation, readConcern: rc}
	src, _, err := rr.Query(ctx, db, coll, key)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	full := bsoncore.Value{Type: bsoncore.TypeNull}
	d, found, err := src.Next(ctx)
	if err != nil {
		return nil, err
	}
	if found {
		full = bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d}
	}
	out := append(make([]byte, 0, len(ev)+len(full.Data)+16), ev[:len(ev)-1]...)
	out = bsoncore.AppendValueElement(out, "fullDocument", full)
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out))), nil
}

// withClusterTime returns cmd with $clusterTime ct appended (cmd itself when ct is null).
func withClusterTime(cmd bsoncore.Document, ct optime.Timestamp) bsoncore.Document {
	if ct == 0 {
		return cmd
	}
	out := append(make([]byte, 0, len(cmd)+64), cmd[:len(cmd)-1]...)
	out = vclock.AppendClusterTime(out, ct)
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

// csRemote is a shard's change stream cursor.
type csRemote struct {
	sc *shardCursor
	// clock is the router's cluster time, gossiped with every getMore: a shard whose clock
	// lags behind the other shards' events then logs its next no-op past them, and its
	// postBatchResumeToken releases them within a no-op interval (its no-ops alone would
	// advance it one increment at a time while its wall clock is behind).
	clock func() optime.Timestamp
}

// more implements csShard: a getMore with maxTimeMS await (the shard's await time).
func (r *csRemote) more(ctx context.Context, batchSize int64, await time.Duration) (csReply, error) {
	if r.sc.id == 0 {
		return csReply{}, nil
	}
	b := bsoncore.NewDocumentBuilder().AppendInt64("getMore", r.sc.id).AppendString("collection", r.sc.coll)
	if batchSize > 0 {
		b.AppendInt64("batchSize", batchSize)
	}
	b.AppendInt64("maxTimeMS", max(await.Milliseconds(), 1))
	cmd := b.Build()
	if r.clock != nil {
		cmd = withClusterTime(cmd, r.clock())
	}
	// The deadline is the router's (the shard's maxTimeMS plus slack): the driver must not
	// turn it into another maxTimeMS.
	reply, err := r.sc.run(noDeadline{ctx}, r.sc.db, cmd)
	if err != nil {
		return csReply{}, err
	}
	id, _, docs, err := parseCursorReply(reply)
	if err != nil {
		return csReply{}, err
	}
	r.sc.id = id
	return csReply{docs: docs, pbrt: shardPBRT(reply), open: id != 0}, nil
}

// kill implements csShard.
func (r *csRemote) kill() { r.sc.kill() }

// explainChangeStream explains a change stream as mongos does: mergeType "mongos", the
// split pipeline (the shards run $changeStream, the router merges by resume token and runs
// the user's stages, unless the split stage sends them to the shards) and every shard's
// explain of its part.
func explainChangeStream(ctx context.Context, c *Cluster, env *service.Env, r *csRequest) (bsoncore.Document, error) {
	all, err := c.Shards.All(ctx)
	if err != nil {
		return nil, err
	}
	stage, _, _, err := r.shardStage(env.State.Concern.Clock.ClusterTime())
	if err != nil {
		return nil, err
	}
	shardsPart := r.shardPipeline(stage)
	// The shards explain a change stream through aggregate's explain option, whose only
	// verbosity is queryPlanner's.
	cmd := r.shardAggregate(stage).AppendBoolean("explain", true).Build()
	ids := make([]string, len(all))
	cmds := make(map[string]bsoncore.Document, len(all))
	for i, s := range all {
		ids[i], cmds[s.ID] = s.ID, cmd
	}
	replies, err := runOnShards(ctx, c, env.DB, ids, cmds)
	if err != nil {
		return nil, err
	}
	merger := bsoncore.NewArrayBuilder().AppendDocument(stageDocRaw("$mergeCursors", bsoncore.NewDocumentBuilder().
		AppendDocument("sort", bsoncore.NewDocumentBuilder().AppendInt32("_id._data", 1).Build()).Build()))
	if !r.split {
		for _, st := range r.rest {
			merger.AppendDocument(st)
		}
	}
	out := bsoncore.NewDocumentBuilder().AppendString("mergeType", "mongos").
		AppendDocument("splitPipeline", bsoncore.NewDocumentBuilder().AppendArray("shardsPart", pipelineArray(shardsPart)).
			AppendArray("mergerPart", merger.Build()).Build())
	sb := bsoncore.NewDocumentBuilder()
	for i, rep := range replies {
		eb := bsoncore.NewDocumentBuilder().AppendString("host", all[i].Host)
		appendElements(eb, filterDoc(rep, func(k string) bool { return !replyFields[k] }))
		sb.AppendDocument(ids[i], eb.Build())
	}
	return out.AppendDocument("shards", sb.Build()).Build(), nil
}
