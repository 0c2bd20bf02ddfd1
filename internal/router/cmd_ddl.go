package router

// DDL through the router (spec: sharding.md "Databases"; MongoDB 7.0's ClusterCreateCmd,
// ClusterDropCollectionCmd, ClusterDropDatabaseCmd, cluster_create_indexes_cmd,
// ClusterRenameCollectionCmd, ClusterCollModCmd): create goes to the database's primary
// shard; createIndexes and dropIndexes to every shard owning chunks of a sharded collection
// (the primary for an unsharded one), answered as mongos's appendRawResponses ({raw: {<shard
// connection string>: reply}}); drop, dropDatabase, renameCollection and collMod go to the
// resumable DDL coordinators of the database's primary shard (internal/sharding/ddl), which
// do the steps on the config server and the shards and finish them across a failover. The
// router forgets what it cached of the namespace afterwards.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/ddl"
)

func ddlCommands() []*service.Command {
	return []*service.Command{
		{Name: "create", Auth: service.AuthCreate(true), Handler: txnStatement(runCreate), Writes: true, Secondary: service.SecondaryNever, Help: "create a collection or view"},
		{Name: "drop", Auth: service.AuthOnNS(auth.DropCollection), Handler: runDrop, Writes: true, Secondary: service.SecondaryNever, Help: "drop a collection"},
		{Name: "dropDatabase", Auth: service.AuthOnDB(auth.DropDatabase), Handler: runDropDatabase, Writes: true, Secondary: service.SecondaryNever, Help: "drop a database"},
		{Name: "createIndexes", Auth: service.AuthOnNS(auth.CreateIndex), Handler: txnStatement(perShardDDL("createIndexes", true)), Writes: true, Secondary: service.SecondaryNever, Help: "create indexes"},
		{Name: "dropIndexes", Auth: service.AuthOnNS(auth.DropIndex), Aliases: []string{"deleteIndexes"}, Handler: perShardDDL("dropIndexes", false), Writes: true, Secondary: service.SecondaryNever, Help: "drop indexes"},
		{Name: "collMod", Auth: service.AuthCollMod(true), Handler: runCollMod, Writes: true, Secondary: service.SecondaryNever, Help: "modify a collection's options"},
		{Name: "renameCollection", Auth: service.AuthRenameCollection, Handler: runRenameCollection, AdminOnly: true, Writes: true, Secondary: service.SecondaryNever, Help: "rename an unsharded collection"},
		{Name: "listDatabases", Auth: service.AuthAnyUser, Handler: runListDatabases, AdminOnly: true, Secondary: service.SecondaryOptIn, Help: "list databases over the shards"},
	}
}

// ddlPrelude is every DDL handler's start: the cluster, no transaction, the namespace.
func ddlPrelude(env *service.Env, cmd bsoncore.Document) (*Cluster, string, string, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, "", "", err
	}
	if err := refuseTransaction(cmd); err != nil {
		return nil, "", "", err
	}
	ns, coll, err := collectionNS(env, cmd)
	if err != nil {
		return nil, "", "", err
	}
	return c, ns, coll, nil
}

// txnDDLPrelude is ddlPrelude for the DDL allowed in a transaction (create and
// createIndexes, wrapped in txnStatement): as mongos 7.0, the router sends them to the
// shards as statements of the transaction, and the shard creates the collection or the
// indexes in it (or refuses, e.g. new indexes on an existing non-empty collection).
func txnDDLPrelude(ctx context.Context, env *service.Env, cmd bsoncore.Document) (*Cluster, string, string, error) {
	if txnFrom(ctx) == nil {
		return ddlPrelude(env, cmd)
	}
	c, err := cluster(env)
	if err != nil {
		return nil, "", "", err
	}
	ns, coll, err := collectionNS(env, cmd)
	if err != nil {
		return nil, "", "", err
	}
	return c, ns, coll, nil
}

// simpleCmd is cmd for a shard: its first field kept, the router's fields dropped.
func simpleCmd(cmd bsoncore.Document, sessionToo bool) bsoncore.Document {
	e, _ := cmd.IndexErr(0)
	idx, out := shardCmd(e.Key(), e.Value(), cmd)
	if sessionToo {
		out = forwardSession(out, cmd)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// runCreate creates the database if needed and the collection (or view) on its primary
// shard: through the shard's create coordinator, under the namespace's DDL locks, so that
// it is serialized with a drop, rename or shardCollection of the namespace. In a
// transaction it is a statement of the transaction sent to the primary shard, as mongos
// 7.0 sends it (no coordinator: the transaction's commit makes it visible), and so is a
// create in config or admin, whose primary shard is the config server (no coordinators).
func runCreate(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, ns, coll, err := txnDDLPrelude(ctx, env, cmd)
	if err != nil {
		return nil, err
	}
	if _, err := c.ensureDatabase(ctx, env.DB); err != nil {
		return nil, err
	}
	defer c.Cache.InvalidateCollection(ns)
	base := simpleCmd(cmd, false)
	if txnFrom(ctx) == nil && env.DB != "config" && env.DB != "admin" {
		fwd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrCreateUnshardedCollection", coll).
			AppendDocument("createRequest", ddlRequest(base)).
			AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
		if _, err := c.primaryShardDDL(ctx, env.DB, ns, fwd); err != nil {
			return nil, err
		}
		return bsoncore.NewDocumentBuilder().Build(), nil
	}
	var reply bsoncore.Document
	err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
		reply, err = c.runOn(ctx, r.DB.Primary, env.DB, routedCmd(base, r, r.DB.Primary))
		return err
	})
	if err != nil {
		return nil, err
	}
	return stripFields(reply, replyNoise), nil
}

// ownerShards are the shards a collection-wide DDL goes to.
func ownerShards(r *catalogcache.Routing) []string {
	if r.Sharded() {
		return r.Table.Shards()
	}
	return []string{r.DB.Primary}
}

// perShardDDL runs a collection DDL command on every shard owning the collection (creating
// the database first when create says the command creates collections).
func perShardDDL(name string, create bool) service.Handler {
	return func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
		c, ns, _, err := txnDDLPrelude(ctx, env, cmd)
		if err != nil {
			return nil, err
		}
		if create {
			if _, err := c.ensureDatabase(ctx, env.DB); err != nil {
				return nil, err
			}
		}
		defer c.Cache.InvalidateCollection(ns)
		base := simpleCmd(cmd, false)
		// A shard that answered is not asked again after another one's stale answer: the
		// commands are not all idempotent (dropIndexes).
		done := map[string]shardReply{}
		err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
			var todo []string
			for _, s := range ownerShards(r) {
				if _, ok := done[s]; !ok {
					todo = append(todo, s)
				}
			}
			var stale error
			for _, sr := range c.broadcast(ctx, env.DB, todo, func(shard string) bsoncore.Document { return routedCmd(base, r, shard) }) {
				if sr.err != nil && c.NoteStale(ns, sr.err) {
					stale = sr.err
					continue
				}
				done[sr.shard] = sr
			}
			return stale
		})
		if err != nil {
			return nil, err
		}
		replies := make([]shardReply, 0, len(done))
		for _, sr := range done {
			replies = append(replies, sr)
		}
		slices.SortFunc(replies, func(a, b shardReply) int { return strings.Compare(a.shard, b.shard) })
		sharded := false
		if r, err := c.Cache.Routing(ctx, ns); err == nil {
			sharded = r.Sharded()
		}
		return c.rawResponses(ctx, replies, !sharded)
	}
}

// runCollMod modifies a collection through the collMod coordinator of the database's primary
// shard (MongoDB 7.0's _shardsvrCollMod): it stops a sharded collection's migrations, runs
// the collMod on every shard owning chunks (the primary for an unsharded collection or a
// view) and resumes them, resumably across the primary shard's failover. The reply is
// mongos's: {raw: {<shard's connection string>: reply}}, the primary's fields first for an
// unsharded collection. A shard's refusal is the command's error (the first one: see the
// coordinator for what the other shards then hold).
func runCollMod(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if env.DB == "config" || env.DB == "admin" {
		// Their primary shard is the config server, which runs no DDL coordinators.
		return perShardDDL("collMod", false)(ctx, env, cmd)
	}
	c, ns, coll, err := ddlPrelude(env, cmd)
	if err != nil {
		return nil, err
	}
	defer c.Cache.InvalidateCollection(ns)
	if _, err := c.Cache.Database(ctx, env.DB); err != nil {
		return nil, err
	}
	fwd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrCollMod", coll).AppendDocument("collModRequest", ddlRequest(simpleCmd(cmd, false))).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	reply, err := c.primaryShardDDL(ctx, env.DB, ns, fwd)
	if err != nil {
		return nil, err
	}
	sharded, _ := reply.Lookup("sharded").BooleanOK()
	arr, _ := reply.Lookup("replies").ArrayOK()
	vals, _ := arr.Values()
	replies := make([]shardReply, 0, len(vals))
	for _, v := range vals {
		d, _ := v.DocumentOK()
		shard, _ := d.Lookup("shard").StringValueOK()
		r, _ := d.Lookup("reply").DocumentOK()
		replies = append(replies, shardReply{shard: shard, reply: r})
	}
	return c.rawResponses(ctx, replies, !sharded)
}

// ddlRequest is a coordinator's request: the command's own options (MongoDB's
// CollModRequest, CreateCommand...) after its first field, without the generic arguments:
// the coordinator writes with majority, and the same options join a running coordinator
// whatever each client's maxTimeMS or comment.
func ddlRequest(base bsoncore.Document) bsoncore.Document {
	elems, _ := base.Elements()
	req := bsoncore.NewDocumentBuilder()
	for _, e := range elems[1:] {
		switch e.Key() {
		case "writeConcern", "maxTimeMS", "comment", "readConcern", "apiVersion", "apiStrict", "apiDeprecationErrors":
			continue
		}
		req.AppendValue(e.Key(), e.Value())
	}
	return req.Build()
}

// shardReply is one shard's answer to a broadcast.
type shardReply struct {
	shard string
	reply bsoncore.Document
	err   error
}

// broadcast runs the command build(shard) on each shard in parallel; replies in shard order.
func (c *Cluster) broadcast(ctx context.Context, db string, shards []string, build func(string) bsoncore.Document) []shardReply {
	out := make([]shardReply, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply, err := c.runOn(ctx, s, db, build(s))
			out[i] = shardReply{shard: s, reply: reply, err: err}
		}()
	}
	wg.Wait()
	return out
}

// rawResponses is mongos's appendRawResponses: {raw: {<shard's connection string>: reply}};
// for an unsharded collection (passthrough) the primary shard's reply fields come first, as
// cluster_create_indexes_cmd's. When a shard failed, the first failure's code and message
// are the command's error, its reply still carrying raw; a write concern error of a shard is
// the reply's.
func (c *Cluster) rawResponses(ctx context.Context, replies []shardReply, passthrough bool) (bsoncore.Document, error) {
	idx, out := bsoncore.AppendDocumentStart(nil)
	var firstErr error
	for _, sr := range replies {
		if sr.err != nil && firstErr == nil {
			firstErr = sr.err
		}
	}
	if passthrough && firstErr == nil && len(replies) == 1 {
		elems, _ := stripFields(replies[0].reply, replyNoise).Elements()
		for _, e := range elems {
			if e.Key() != "writeConcernError" {
				out = append(out, e...)
			}
		}
	}
	ridx, o := bsoncore.AppendDocumentElementStart(out, "raw")
	var wce []shardWCError
	inRaw := map[string]bool{}
	for k := range replyNoise {
		inRaw[k] = true
	}
	for _, k := range []string{"ok", "errmsg", "code", "codeName", "errorLabels"} {
		delete(inRaw, k)
	}
	for _, sr := range replies {
		key := sr.shard
		if rs, err := c.replicaSet(ctx, sr.shard); err == nil {
			key = rs.Hosts().String()
		}
		if sr.err != nil {
			o = bsoncore.AppendDocumentElement(o, key, errorReplyDoc(sr.err))
			continue
		}
		if d, ok := sr.reply.Lookup("writeConcernError").DocumentOK(); ok {
			wce = append(wce, shardWCError{shard: sr.shard, doc: d})
		}
		o = bsoncore.AppendDocumentElement(o, key, stripFields(sr.reply, inRaw))
	}
	out, _ = bsoncore.AppendDocumentEnd(o, ridx)
	if len(wce) > 0 {
		out = bsoncore.AppendDocumentElement(out, "writeConcernError", mergeWCErrors(wce))
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	if firstErr != nil {
		return nil, withReply(firstErr, out)
	}
	return out, nil
}

// withReply is a shard's failure as the command's error, its reply (raw...) attached.
func withReply(err error, reply bsoncore.Document) error {
	me, ok := mongoerr.As(err)
	if !ok {
		me = &mongoerr.Error{Code: mongoerr.InternalError, Msg: err.Error()}
	}
	return &mongoerr.Error{Code: me.Code, Msg: me.Msg, Labels: me.Labels, Info: reply, Err: err}
}

// errorReplyDoc is err as a shard's error reply: {ok: 0, errmsg, code, codeName, ...}.
func errorReplyDoc(err error) bsoncore.Document {
	d := errorDoc(err)
	idx, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendDoubleElement(out, "ok", 0)
	out = append(out, d[4:len(d)-1]...)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// allShards are the ids of every shard in the registry, sorted.
func (c *Cluster) allShards(ctx context.Context) ([]string, error) {
	if err := c.Shards.Reload(ctx); err != nil {
		return nil, err
	}
	all, err := c.Shards.All(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(all))
	for _, s := range all {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids, nil
}

// firstError is the first non-ignorable error of a broadcast.
func firstError(replies []shardReply, ignore ...mongoerr.Code) error {
	for _, sr := range replies {
		if sr.err != nil && !slices.Contains(ignore, mongoerr.CodeOf(sr.err)) {
			return sr.err
		}
	}
	return nil
}

// runDrop drops a collection through the drop coordinator of the database's primary shard
// (_shardsvrDropCollection, MongoDB 7.0's ShardsvrDropCollection with the database
// version): it removes a sharded collection's catalog entries and has every shard drop its
// copy, resumably across a failover of that shard, and answers once the drop is complete.
// A retriable error (the primary stepped down while it ran) is retried: the new primary
// resumes the coordinator and the retry joins it.
func runDrop(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, ns, coll, err := ddlPrelude(env, cmd)
	if err != nil {
		return nil, err
	}
	defer c.Cache.InvalidateCollection(ns)
	switch env.DB {
	case "config", "admin":
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "Cannot drop collection in '%s' database in sharded cluster", env.DB)
	}
	if _, err := c.Cache.Database(ctx, env.DB); mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		// As mongos: the drop succeeds, saying why nothing was dropped.
		return bsoncore.NewDocumentBuilder().AppendString("info", "database does not exist").Build(), nil
	} else if err != nil {
		return nil, err
	}
	fwd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrDropCollection", coll).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	if _, err := c.primaryShardDDL(ctx, env.DB, ns, fwd); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendString("ns", ns).Build(), nil
}

// primaryShardDDL sends a DDL coordinator's command (fwd, on db) to the primary shard of
// db, with the database version (routing as ns), and retries it after a retriable error:
// the primary shard's failover interrupted the coordinator, the new primary resumes it and
// the retry joins it.
func (c *Cluster) primaryShardDDL(ctx context.Context, db, ns string, fwd bsoncore.Document) (bsoncore.Document, error) {
	var reply bsoncore.Document
	var err error
	deadline := time.Now().Add(ddlRetryWindow)
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		err = c.WithRouting(ctx, ns, func(r *catalogcache.Routing) error {
			rs, err := c.Shard(ctx, r.DB.Primary)
			if err != nil {
				return err
			}
			reply, err = ddl.Run(ctx, rs, db, withDatabaseVersion(fwd, r))
			return err
		})
		if err == nil || ctx.Err() != nil || !ddlRetriable(err) || time.Now().Add(delay).After(deadline) {
			break
		}
		c.Cache.InvalidateDatabase(db)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
	return reply, err
}

// ddlRetriable: retriable errors, and a server selection that timed out (the primary
// shard had no primary for the client's selection timeout) while the request's own time
// was not up.
func ddlRetriable(err error) bool {
	return retriable(err) || errors.Is(err, context.DeadlineExceeded)
}

// ddlRetryWindow bounds how long a router retries a DDL command that its coordinator's
// failover interrupted: long enough for the primary shard to elect a new primary (MongoDB's
// mongos waits for a primary about as long, then its kIdempotent policy retries).
const ddlRetryWindow = 30 * time.Second

// runDropDatabase drops a database: its sharded collections' catalog entries, the database on
// every shard, then its config.databases entry (MongoDB 7.0 sends _shardsvrDropDatabase to
// the primary shard, whose coordinator does these steps).
func runDropDatabase(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	if err := refuseTransaction(cmd); err != nil {
		return nil, err
	}
	// mongos's checks, in its order.
	switch env.DB {
	case "admin", "config":
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "Cannot drop the %s database", env.DB)
	}
	if v := lookupFirst(cmd); !isOne(v) {
		return nil, mongoerr.New(mongoerr.BadValue, "Must pass 1 as the 'dropDatabase' parameter")
	}
	defer c.Cache.InvalidateDatabase(env.DB)
	if _, err := c.Cache.Database(ctx, env.DB); mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		return bsoncore.NewDocumentBuilder().Build(), nil // as mongos: dropping nothing succeeds
	} else if err != nil {
		return nil, err
	}
	// The primary shard's drop-database coordinator drops the sharded collections, the
	// database on every shard and its catalog entry, resumably.
	colls, err := c.shardedCollections(ctx, env.DB)
	if err != nil {
		return nil, err
	}
	fwd := bsoncore.NewDocumentBuilder().AppendInt32("_shardsvrDropDatabase", 1).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	if _, err := c.primaryShardDDL(ctx, env.DB, env.DB+".$cmd", fwd); err != nil {
		return nil, err
	}
	for _, coll := range colls {
		c.Cache.InvalidateCollection(coll.NS)
	}
	return bsoncore.NewDocumentBuilder().Build(), nil // mongos's reply is {ok: 1}
}

func isOne(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble:
		return v.AsFloat64() == 1
	case bsoncore.TypeBoolean:
		return v.Boolean()
	}
	return false
}

// shardedCollections reads config.collections entries of db.
func (c *Cluster) shardedCollections(ctx context.Context, db string) ([]catalogcache.Collection, error) {
	idx, cmd := bsoncore.AppendDocumentStart(nil)
	cmd = bsoncore.AppendStringElement(cmd, "find", "collections")
	fidx, cmd := bsoncore.AppendDocumentElementStart(cmd, "filter")
	ridx, cmd := bsoncore.AppendDocumentElementStart(cmd, "_id")
	cmd = bsoncore.AppendRegexElement(cmd, "$regex", "^"+regexQuote(db)+`\.`, "")
	cmd, _ = bsoncore.AppendDocumentEnd(cmd, ridx)
	cmd, _ = bsoncore.AppendDocumentEnd(cmd, fidx)
	ridx, cmd = bsoncore.AppendDocumentElementStart(cmd, "readConcern")
	cmd = bsoncore.AppendStringElement(cmd, "level", "majority")
	cmd, _ = bsoncore.AppendDocumentEnd(cmd, ridx)
	cmd = bsoncore.AppendInt32Element(cmd, "batchSize", 100000)
	cmd = bsoncore.AppendBooleanElement(cmd, "singleBatch", true)
	cmd, _ = bsoncore.AppendDocumentEnd(cmd, idx)
	reply, err := c.runOn(ctx, configShard, "config", cmd)
	if err != nil {
		return nil, err
	}
	var out []catalogcache.Collection
	arr, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := arr.Values()
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			continue
		}
		coll, err := configclient.ParseCollection(d)
		if err != nil {
			return nil, err
		}
		out = append(out, coll)
	}
	return out, nil
}

func regexQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// runRenameCollection renames a collection, sharded or not, through the rename coordinator
// of the source database's primary shard.
func runRenameCollection(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	if err := refuseTransaction(cmd); err != nil {
		return nil, err
	}
	from, ok := lookupFirst(cmd).StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'renameCollection' is the wrong type '%s', expected type 'string'",
			bsonutil.TypeName(lookupFirst(cmd).Type))
	}
	tv := cmd.Lookup("to")
	to, ok := tv.StringValueOK()
	if !ok {
		if tv.Type == 0 {
			return nil, mongoerr.New(mongoerr.Location40414, "BSON field 'renameCollection.to' is missing but a required field")
		}
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'renameCollection.to' is the wrong type '%s', expected type 'string'",
			bsonutil.TypeName(tv.Type))
	}
	for _, ns := range []string{from, to} {
		if err := catalog.ValidateNS(ns); err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
		}
	}
	defer c.Cache.InvalidateCollection(from)
	defer c.Cache.InvalidateCollection(to)
	fromDB, fromColl, _ := cut(from)
	toDB, _, _ := cut(to)
	if _, err := c.Cache.Database(ctx, fromDB); err != nil {
		if mongoerr.Is(err, mongoerr.NamespaceNotFound) {
			return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "Source namespace %s does not exist", from)
		}
		return nil, err
	}
	if toDB != fromDB {
		if _, err := c.ensureDatabase(ctx, toDB); err != nil {
			return nil, err
		}
	}
	// The source database's primary shard runs the rename coordinator (MongoDB 7.0's
	// _shardsvrRenameCollection): sharded or not, across shards, resumably.
	fwd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrRenameCollection", fromColl).AppendString("to", to)
	for _, f := range []string{"dropTarget", "stayTemp"} {
		if v, err := cmd.LookupErr(f); err == nil {
			fwd.AppendBoolean(f, bsonutil.TrueValue(v))
		}
	}
	fwd.AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build())
	if _, err := c.primaryShardDDL(ctx, fromDB, from, fwd.Build()); err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
