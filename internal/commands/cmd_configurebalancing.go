package commands

// _configsvrConfigureCollectionBalancing (MongoDB 7.0's
// ShardingCatalogManager::configureCollectionBalancing; spec: sharding.md "Balancer"): a
// collection's own chunk size (config.collections maxChunkSizeBytes, read by the balancer,
// the auto-splitter and moveRange without max) and its auto-merge switch (enableAutoMerge).
// Those readers read config.collections themselves, so no version bump is needed for them to
// see the change; the balancer is woken to act on it at once.

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/configsvr"
)

func configureCollectionBalancingCommand() *service.Command {
	return &service.Command{Name: "_configsvrConfigureCollectionBalancing", Auth: service.AuthInternal, Handler: runConfigsvrConfigureCollectionBalancing,
		AdminOnly: true, Secondary: service.SecondaryNever, Writes: true,
		Help: "Internal command, which is exported by the sharding config server. Do not call directly."}
}

func runConfigsvrConfigureCollectionBalancing(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_configsvrConfigureCollectionBalancing"
	if err := requireConfigServer(env, name); err != nil {
		return nil, err
	}
	v := cmd.Index(0).Value()
	ns, ok := v.StringValueOK()
	if !ok {
		return nil, typeMismatch(name, name, v.Type, "string")
	}
	if db, coll, found := strings.Cut(ns, "."); !found || db == "" || coll == "" || strings.ContainsRune(ns, 0) {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	var (
		chunkSize          *int64
		defragment, merger *bool
	)
	if v := cmd.Lookup("chunkSize"); v.Type != 0 {
		n, err := intArg(name, "chunkSize", v)
		if err != nil {
			return nil, err
		}
		chunkSize = &n
	}
	for _, f := range []struct {
		field string
		dst   **bool
	}{{"defragmentCollection", &defragment}, {"enableAutoMerger", &merger}} {
		if v := cmd.Lookup(f.field); v.Type != 0 {
			b, ok := v.BooleanOK()
			if !ok {
				return nil, typeMismatch(name, f.field, v.Type, "bool")
			}
			*f.dst = &b
		}
	}
	if chunkSize == nil && defragment == nil && merger == nil {
		return emptyDoc, nil // as MongoDB: nothing to change is not an error
	}
	if defragment != nil && *defragment {
		return nil, mongoerr.New(mongoerr.CommandNotSupported,
			"defragmentCollection is not supported: Humongo's balancer does not defragment collections (the auto-merger merges contiguous chunks of a shard)")
	}
	set := bsoncore.NewDocumentBuilder()
	if chunkSize != nil && *chunkSize != 0 {
		const mb = 1 << 20
		if *chunkSize < 1 || *chunkSize > 1024 {
			return nil, mongoerr.Newf(mongoerr.InvalidOptions, "Chunk size '%d' out of range [1MB, 1GB]", *chunkSize)
		}
		set.AppendInt64("maxChunkSizeBytes", *chunkSize*mb)
	}
	unset := chunkSize != nil && *chunkSize == 0
	if merger != nil {
		set.AppendBoolean("enableAutoMerge", *merger)
	}
	u := bsoncore.NewDocumentBuilder()
	if setDoc := set.Build(); len(setDoc) > 5 {
		u.AppendDocument("$set", setDoc)
	}
	if unset {
		u.AppendDocument("$unset", bsoncore.NewDocumentBuilder().AppendInt32("maxChunkSizeBytes", 1).Build())
	}
	q := bsoncore.NewDocumentBuilder().AppendString("_id", ns).Build()
	upd := bsoncore.NewDocumentBuilder().AppendString("update", "collections").
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", q).AppendDocument("u", u.Build()).Build()).Build()).
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build()
	reply, err := internalRunner(env.State, env.Registry)(ctx, "config", upd)
	if err == nil {
		err = configsvr.WriteReplyError(reply)
	}
	if err != nil {
		return nil, fmt.Errorf("configureCollectionBalancing of %s: %w", ns, err)
	}
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotSharded, "Expected to match one doc for query %s but matched %d", bsonutil.FormatDoc(q), n)
	}
	balancerState(env.State, env.Registry).b.Wake()
	return emptyDoc, nil
}
