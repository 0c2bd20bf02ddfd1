package router

// The read commands humongos routes (this file registers them: readCommands), and count,
// distinct, listCollections and listIndexes (MongoDB's cluster_count_cmd,
// cluster_distinct_cmd, cluster_list_collections_cmd, cluster_list_indexes_cmd).

import (
	"context"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/concern"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/vclock"
)

// readCommands are the routed read commands; NewRegistry registers them and unsupported
// no longer lists their names.
func readCommands() []*service.Command {
	return []*service.Command{
		{Name: "find", Auth: service.AuthFind, Handler: txnStatement(readPrefHandler(readsAt(runFind))), Help: "query for documents", Secondary: service.SecondaryAlways, Counter: "query"},
		{Name: "getMore", Auth: service.AuthGetMore, Handler: txnStatement(runGetMore), Help: "retrieve more results from an existing cursor", Secondary: service.SecondaryAlways, Counter: "getmore"},
		{Name: "killCursors", Auth: service.AuthAnyUser, Handler: runKillCursors, Help: "kill a list of cursors", Secondary: service.SecondaryAlways},
		{Name: "count", Auth: service.AuthOnNS(auth.Find), Handler: txnStatement(readPrefHandler(readsAt(runCount))), Help: "count documents matching a query", Secondary: service.SecondaryAlways},
		{Name: "distinct", Auth: service.AuthOnNS(auth.Find), Handler: txnStatement(readPrefHandler(readsAt(runDistinct))), Help: "the distinct values of a field", Secondary: service.SecondaryAlways},
		{Name: "aggregate", Auth: service.AuthAggregate(true), Handler: txnStatement(readPrefHandler(readsAt(runAggregate))), Help: "run an aggregation pipeline", Secondary: service.SecondaryAlways},
		{Name: "explain", Auth: service.AuthExplain(true), Handler: noTxn(readPrefHandler(runExplain)), Help: "explain a find, aggregate, count or distinct", Secondary: service.SecondaryAlways},
		{Name: "listCollections", Auth: service.AuthListCollections, Handler: noTxn(runListCollections), Help: "list a database's collections", Secondary: service.SecondaryAlways},
		{Name: "listIndexes", Auth: service.AuthOnNS(auth.ListIndexes), Handler: noTxn(runListIndexes), Help: "list a collection's indexes", Secondary: service.SecondaryAlways},
	}
}

// readAtKey carries the cluster time a read is routed at (a *bson.Timestamp).
type readAtKey struct{}

// readsAt wraps a read's handler: a read at a cluster time, a snapshot read with
// atClusterTime or a statement of a snapshot transaction (whose atClusterTime the router
// chose on its first statement), is routed by the chunk ownership of that time (WithRouting,
// catalogcache.Routing.At), as mongos routes with getCollectionRoutingInfoAt: a chunk that
// moved since is read on the shard that owned it then, which filters by that time's
// ownership too. Writes are always routed by the current placement.
//
// A snapshot read outside a transaction without atClusterTime of a sharded collection gets
// one here, as mongos selects it (the router's cluster time, or the read's afterClusterTime
// when later), so that every shard reads at the same point; the reply reports it
// (cursor.atClusterTime, or atClusterTime for distinct), where drivers take a snapshot
// session's time from. Of an unsharded collection (one shard), the shard selects it, as
// mongos leaves it to a single targeted shard (SERVER-47952): the shard's time is the
// freshest, and a router's clock may lag a collection just created through another router;
// the router reports the time the shard chose.
func readsAt(h service.Handler) service.Handler {
	return func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
		var selected *bson.Timestamp
		var chosen *shardChosenTime
		if txnFrom(ctx) == nil && isSnapshotWithoutTime(cmd) {
			if readsShardedCollection(ctx, env, cmd) {
				rc, _ := cmd.Lookup("readConcern").DocumentOK()
				withTime, err := txnReadConcern(env, rc)
				if err != nil {
					return nil, err
				}
				cmd = withField(cmd, "readConcern", bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: withTime})
				selected = snapshotTime(cmd.Lookup("readConcern"))
			} else {
				chosen = &shardChosenTime{}
				ctx = context.WithValue(ctx, shardChosenKey{}, chosen)
			}
		}
		if ts := readAtClusterTime(ctx, cmd); ts != nil {
			ctx = context.WithValue(ctx, readAtKey{}, ts)
		}
		reply, err := h(ctx, env, cmd)
		if err != nil {
			return reply, err
		}
		if chosen != nil {
			chosen.mu.Lock()
			selected = chosen.ts
			chosen.mu.Unlock()
		}
		if selected == nil || replyAtClusterTime(reply) != nil {
			return reply, nil
		}
		return concern.AddAtClusterTime(reply, uint64(selected.T)<<32|uint64(selected.I)), nil
	}
}

// isSnapshotWithoutTime reports whether cmd's readConcern is snapshot without atClusterTime.
func isSnapshotWithoutTime(cmd bsoncore.Document) bool {
	rc, ok := cmd.Lookup("readConcern").DocumentOK()
	if !ok {
		return false
	}
	level, _ := rc.Lookup("level").StringValueOK()
	_, err := rc.LookupErr("atClusterTime")
	return level == "snapshot" && err != nil
}

// readsShardedCollection reports whether cmd reads a sharded collection (as far as the
// routing cache knows; anything else, a missing database included, is one shard's read).
func readsShardedCollection(ctx context.Context, env *service.Env, cmd bsoncore.Document) bool {
	c, err := cluster(env)
	if err != nil {
		return false
	}
	coll, ok := firstArg(cmd).StringValueOK()
	if !ok {
		return false
	}
	r, err := c.Cache.Routing(ctx, env.DB+"."+coll)
	return err == nil && r.Sharded()
}

// shardChosenTime is the atClusterTime a shard chose for a snapshot read the router left it
// to (the first one reported).
type shardChosenTime struct {
	mu sync.Mutex
	ts *bson.Timestamp
}

type shardChosenKey struct{}

// noteShardAtClusterTime records the atClusterTime of a shard's reply to a read whose time
// the router left to the shard (readsAt); anything else is not recorded.
func noteShardAtClusterTime(ctx context.Context, reply bsoncore.Document) {
	chosen, _ := ctx.Value(shardChosenKey{}).(*shardChosenTime)
	if chosen == nil {
		return
	}
	ts := replyAtClusterTime(reply)
	if ts == nil {
		return
	}
	chosen.mu.Lock()
	defer chosen.mu.Unlock()
	if chosen.ts == nil {
		chosen.ts = ts
	}
}

// replyAtClusterTime is a read reply's atClusterTime: in its cursor, or top-level (distinct).
func replyAtClusterTime(reply bsoncore.Document) *bson.Timestamp {
	v := reply.Lookup("cursor", "atClusterTime")
	if v.Type == 0 {
		v = reply.Lookup("atClusterTime")
	}
	if t, i, ok := v.TimestampOK(); ok {
		return &bson.Timestamp{T: t, I: i}
	}
	return nil
}

// gossipReadTime returns cmd, for a read at a cluster time outside a transaction, with that
// time as its $clusterTime: the shard's clock must reach it (its no-op write, when it has
// to make one to read there, must land after it), as routerTxn.attach gossips a snapshot
// transaction's; the time may come from another shard's clock than the one the driver
// gossips to this shard (the shard takes the highest $clusterTime it is sent).
func gossipReadTime(ctx context.Context, cmd bsoncore.Document) bsoncore.Document {
	ts := readAtFrom(ctx)
	if ts == nil || len(cmd) < 5 {
		return cmd
	}
	out := append(make([]byte, 0, len(cmd)+64), cmd[:len(cmd)-1]...)
	out = vclock.AppendClusterTime(out, optime.MakeTimestamp(ts.T, ts.I))
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

// withField returns cmd with field key's value replaced by v (appended when absent).
func withField(cmd bsoncore.Document, key string, v bsoncore.Value) bsoncore.Document {
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(cmd)+len(v.Data)))
	els, _ := cmd.Elements()
	done := false
	for _, el := range els {
		if el.Key() == key {
			out = bsoncore.AppendValueElement(out, key, v)
			done = true
			continue
		}
		out = append(out, el...)
	}
	if !done {
		out = bsoncore.AppendValueElement(out, key, v)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// readAtClusterTime is the time a read in ctx with command cmd reads at: its transaction's
// atClusterTime, else the command's snapshot readConcern's; nil for a read of the newest data.
func readAtClusterTime(ctx context.Context, cmd bsoncore.Document) *bson.Timestamp {
	if t := txnFrom(ctx); t != nil {
		return t.atClusterTime()
	}
	return snapshotTime(cmd.Lookup("readConcern"))
}

// snapshotTime is a readConcern's atClusterTime when its level is snapshot (nil otherwise).
func snapshotTime(v bsoncore.Value) *bson.Timestamp {
	rc, ok := v.DocumentOK()
	if !ok {
		return nil
	}
	if level, _ := rc.Lookup("level").StringValueOK(); level != "snapshot" {
		return nil
	}
	if s, i, ok := rc.Lookup("atClusterTime").TimestampOK(); ok {
		return &bson.Timestamp{T: s, I: i}
	}
	return nil
}

// readAtFrom is the cluster time the request in ctx reads at (nil: the newest data).
func readAtFrom(ctx context.Context) *bson.Timestamp {
	ts, _ := ctx.Value(readAtKey{}).(*bson.Timestamp)
	return ts
}

// noTxn wraps a handler with refuseTransaction.
func noTxn(h service.Handler) service.Handler {
	return func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
		if err := refuseTransaction(cmd); err != nil {
			return nil, err
		}
		return h(ctx, env, cmd)
	}
}

// appendNumber is BSONObjBuilder::appendNumber: an int when it fits, else a long.
func appendNumber(b *bsoncore.DocumentBuilder, k string, n int64) *bsoncore.DocumentBuilder {
	if n >= -1<<31 && n < 1<<31 {
		return b.AppendInt32(k, int32(n))
	}
	return b.AppendInt64(k, n)
}

func runCount(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "count"
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, err := collectionArg(env, cmd)
	if err != nil {
		return nil, err
	}
	filter, err := docArg(name, cmd, "query")
	if err != nil {
		return nil, err
	}
	limit, _, err := intField(name, cmd, "limit")
	if err != nil {
		return nil, err
	}
	if limit < 0 {
		limit = -limit // count's negative limit is its absolute value
	}
	skip, _, err := intField(name, cmd, "skip")
	if err != nil {
		return nil, err
	}
	if skip < 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "skip value is negative in count query")
	}
	_, collated, err := readCollation(name, cmd)
	if err != nil {
		return nil, err
	}
	var total int64
	err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		shards, err := targetShards(r, filter, collated)
		if err != nil {
			return err
		}
		fwd := forward(cmd, nil, nil)
		if len(shards) > 1 {
			// As mongos: each shard counts up to skip+limit with no skip; the router
			// applies skip and limit to the sum.
			set := bsoncore.NewDocumentBuilder()
			if limit > 0 {
				set.AppendInt64("limit", limit+skip)
			}
			fwd = forward(cmd, map[string]bool{"skip": true}, set.Build())
		}
		replies, err := runOnShards(ctx, c, env.DB, shards, versionedFor(fwd, r, shards))
		if err != nil {
			return err
		}
		total = 0
		for _, rep := range replies {
			n, _ := rep.Lookup("n").AsInt64OK()
			total += n
		}
		if len(shards) > 1 {
			total = max(total-skip, 0)
			if limit > 0 {
				total = min(total, limit)
			}
		}
		return nil
	})
	if missingDatabase(err) {
		err, total = nil, 0
	}
	if err != nil {
		return nil, err
	}
	return appendNumber(bsoncore.NewDocumentBuilder(), "n", total).Build(), nil
}

func runDistinct(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "distinct"
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, err := collectionArg(env, cmd)
	if err != nil {
		return nil, err
	}
	filter, err := docArg(name, cmd, "query")
	if err != nil {
		return nil, err
	}
	coll, collated, err := readCollation(name, cmd)
	if err != nil {
		return nil, err
	}
	var sc bsonutil.StringComparer
	if coll != nil {
		sc = coll
	}
	var values []bsoncore.Value
	err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		shards, err := targetShards(r, filter, collated)
		if err != nil {
			return err
		}
		replies, err := runOnShards(ctx, c, env.DB, shards, versionedFor(forward(cmd, nil, nil), r, shards))
		if err != nil {
			return err
		}
		values = values[:0]
		for _, rep := range replies {
			noteShardAtClusterTime(ctx, rep)
			arr, _ := rep.Lookup("values").ArrayOK()
			vals, err := arr.Values()
			if err != nil {
				return mongoerr.Newf(mongoerr.FailedToParse, "distinct reply from a shard: %v", err)
			}
			values = append(values, vals...)
		}
		if len(shards) > 1 {
			// The union, deduplicated under the query's collation and ordered by it, as
			// mongos's BSONObjSet of the shards' values.
			slices.SortStableFunc(values, func(a, b bsoncore.Value) int { return bsonutil.CompareWithCollator(a, b, sc) })
			values = slices.CompactFunc(values, func(a, b bsoncore.Value) bool { return bsonutil.CompareWithCollator(a, b, sc) == 0 })
		}
		return nil
	})
	if missingDatabase(err) {
		err, values = nil, nil
	}
	if err != nil {
		return nil, err
	}
	ab := bsoncore.NewArrayBuilder()
	for _, v := range values {
		ab.AppendValue(v)
	}
	return bsoncore.NewDocumentBuilder().AppendArray("values", ab.Build()).Build(), nil
}

// withDBVersion returns cmd carrying database db's version (commands on a database's
// primary shard that name no collection).
func withDBVersion(cmd bsoncore.Document, d catalogcache.Database) bsoncore.Document {
	if d.Version.IsFixed() {
		return cmd
	}
	return forward(cmd, nil, bsoncore.NewDocumentBuilder().AppendDocument("databaseVersion", d.Version.Doc()).Build())
}

// withDatabase runs f with database db's cached entry, refreshing and retrying on
// StaleDbVersion as WithRouting does for collections.
func (c *Cluster) withDatabase(ctx context.Context, db string, f func(d catalogcache.Database) error) error {
	var err error
	for attempt := 0; attempt <= maxStaleRetries; attempt++ {
		var d catalogcache.Database
		if d, err = c.Cache.Database(ctx, db); err != nil {
			return err
		}
		if err = f(d); err == nil || !c.NoteStale(db+".$cmd", err) || !txnMayRetryStale(ctx, c) {
			return err
		}
	}
	return err
}

// runListCollections asks the database's primary shard, rewriting its cursor.
func runListCollections(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns := env.DB + ".$cmd.listCollections"
	var reply bsoncore.Document
	err = c.withDatabase(ctx, env.DB, func(d catalogcache.Database) error {
		cursors, err := openCursors(ctx, c, env.DB, []string{d.Primary},
			map[string]bsoncore.Document{d.Primary: withDBVersion(forward(cmd, nil, nil), d)})
		if err != nil {
			return err
		}
		src := &mergeSource{cursors: cursors}
		if service.Truthy(cmd.Lookup("authorizedCollections")) {
			// The shard lists every collection to the router's internal user: the user's
			// own privileges decide here which it sees.
			src.keep = func(d bsoncore.Document) bool {
				name, _ := d.Lookup("name").StringValueOK()
				return service.ListCollectionVisible(env.Auth, cmd, env.DB, name)
			}
		}
		reply, err = firstBatchReply(ctx, env, cmd, ns, src, firstCount(cmd), false, false)
		return err
	})
	if missingDatabase(err) {
		return emptyListReply(ns), nil
	}
	return reply, err
}

// runListIndexes asks the primary shard of an unsharded collection, or the shard owning a
// sharded collection's first chunk (both hold the collection and its indexes).
func runListIndexes(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	ns, err := collectionArg(env, cmd)
	if err != nil {
		return nil, err
	}
	var reply bsoncore.Document
	err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		shard := r.DB.Primary
		if r.Sharded() {
			shard = r.Table.Chunks()[0].Shard
		}
		cursors, err := openCursors(ctx, c, env.DB, []string{shard}, versionedFor(forward(cmd, nil, nil), r, []string{shard}))
		if err != nil {
			return err
		}
		reply, err = firstBatchReply(ctx, env, cmd, ns, &mergeSource{cursors: cursors}, firstCount(cmd), false, false)
		return err
	})
	if missingDatabase(err) {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "ns does not exist: %s", ns)
	}
	return reply, err
}

// firstCount is a list command's first batch size (cursor.batchSize, else all).
func firstCount(cmd bsoncore.Document) int64 {
	if cur, ok := cmd.Lookup("cursor").DocumentOK(); ok {
		if n, ok := cur.Lookup("batchSize").AsInt64OK(); ok && n > 0 {
			return n
		}
	}
	return 1<<63 - 1
}

func emptyListReply(ns string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendDocument("cursor", bsoncore.NewDocumentBuilder().
		AppendInt64("id", 0).AppendString("ns", ns).AppendArray("firstBatch", bsoncore.NewArrayBuilder().Build()).Build()).Build()
}
