package commands

// The shard side of the resumable DDL coordinators (spec sharding.md "Sharding DDL
// Coordinator", internal/sharding/ddl): the primary shard's entry commands
// (_shardsvrRenameCollection, _shardsvrDropDatabase, _shardsvrSetAllowMigrations,
// _shardsvrRefineCollectionShardKey), the participants' parts (rename, drop database,
// _shardsvrParticipantBlock) and the persisted DDL critical sections they share.

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
	"humongo/internal/sharding/filtering"
	"humongo/internal/sharding/migration"
)

func addShardsvrRenameAndDropDatabase(r *service.Registry) {
	internal := func(name string, h service.Handler, help string) {
		add(r, &service.Command{Name: name, Handler: h, Help: "Internal command, which is exported by the sharding server. Do not call directly. " + help,
			Secondary: service.SecondaryNever, Writes: true, Auth: service.AuthInternal})
	}
	internal("_shardsvrRenameCollection", runShardsvrRenameCollection, "Renames a collection.")
	internal("_shardsvrRenameCollectionParticipant", runShardsvrRenameCollectionParticipant, "Blocks CRUD and renames a collection on a participant shard.")
	internal("_shardsvrRenameCollectionUnblockParticipant", runShardsvrRenameCollectionUnblockParticipant, "Unblocks CRUD on a participant shard after a rename.")
	internal("_shardsvrDropDatabase", runShardsvrDropDatabase, "Drops a database.")
	internal("_shardsvrDropDatabaseParticipant", runShardsvrDropDatabaseParticipant, "Drops a database on a participant shard.")
	internal("_shardsvrSetAllowMigrations", runShardsvrSetAllowMigrations, "Sets the allowMigrations flag on the specified collection.")
	internal("_shardsvrParticipantBlock", runShardsvrParticipantBlock, "Blocks or unblocks the CRUD operations on a collection of a participant shard.")
	internal("_shardsvrRefineCollectionShardKey", runShardsvrRefineCollectionShardKey, "Adds a suffix to the shard key of an existing collection ('refines the shard key').")
}

// runShardsvrParticipantBlock ({_shardsvrParticipantBlock: coll, blockType: "ReadsAndWrites" |
// "Unblock", reason}) is a DDL coordinator's critical section on one participant: block the
// namespace's versioned reads and writes (persisted, recovered at step-up), or refresh its
// filtering metadata and release it. Majority before it answers.
func runShardsvrParticipantBlock(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrParticipantBlock"
	if _, err := requireShard(env, name); err != nil {
		return nil, err
	}
	ns, err := collArg(env, cmd, name)
	if err != nil {
		return nil, err
	}
	v, err := requiredField(cmd, name, "blockType", bsoncore.TypeString)
	if err != nil {
		return nil, err
	}
	reason := fmt.Sprintf("{ command: \"%s\", ns: \"%s\" }", name, ns)
	if r, ok := lookup(cmd, "reason").StringValueOK(); ok {
		reason = r
	}
	rt, _, err := shardRuntime(env)
	if err != nil {
		return nil, err
	}
	run := ddl.RunFunc(internalRunner(env.State, env.Registry))
	switch bt := v.StringValue(); bt {
	case "ReadsAndWrites":
		if err := enterDDLCriticalSection(ctx, run, rt, ns, reason); err != nil {
			return nil, err
		}
	case "Unblock":
		if _, err := rt.RefreshCollection(ctx, ns); err != nil {
			return nil, fmt.Errorf("refresh %s before unblocking it: %w", ns, err)
		}
		if err := exitDDLCriticalSection(ctx, run, rt, ns); err != nil {
			return nil, err
		}
	default:
		return nil, mongoerr.Newf(mongoerr.BadValue, "Enumeration value '%s' for field '%s.blockType' is not a valid value.", bt, name)
	}
	return waitMajority(ctx, env, emptyDoc)
}

// runShardsvrRefineCollectionShardKey ({_shardsvrRefineCollectionShardKey: coll, newShardKey}
// on the collection's database) runs the refine-shard-key coordinator.
func runShardsvrRefineCollectionShardKey(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrRefineCollectionShardKey"
	svc, ns, v, err := coordinatorArgs(env, cmd, name, "newShardKey", bsoncore.TypeEmbeddedDocument)
	if err != nil {
		return nil, err
	}
	if err := svc.RefineShardKey(ctx, ns, v.Document()); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// runShardsvrSetAllowMigrations ({_shardsvrSetAllowMigrations: coll, allowMigrations: bool}
// on the collection's database) runs the set-allow-migrations coordinator.
func runShardsvrSetAllowMigrations(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrSetAllowMigrations"
	svc, ns, v, err := coordinatorArgs(env, cmd, name, "allowMigrations", bsoncore.TypeBoolean)
	if err != nil {
		return nil, err
	}
	if err := svc.SetAllowMigrations(ctx, ns, v.Boolean()); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// collArg reads {<name>: coll} of the request's database as a namespace.
func collArg(env *service.Env, cmd bsoncore.Document, name string) (string, error) {
	coll, ok := commandArg(cmd).StringValueOK()
	if !ok {
		return "", typeMismatch(name, name, commandArg(cmd).Type, "string")
	}
	ns := env.DB + "." + coll
	if err := catalog.ValidateNS(ns); err != nil {
		return "", mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", ns)
	}
	return ns, nil
}

// coordinatorArgs is a DDL coordinator command's prelude ({<name>: coll, <field>: value} on the
// collection's database): the node's coordinator service, the namespace, and the required
// field of type t.
func coordinatorArgs(env *service.Env, cmd bsoncore.Document, name, field string, t bsoncore.Type) (*ddl.CoordinatorService, string, bsoncore.Value, error) {
	svc, err := ddlCoordinatorsOf(env, name)
	if err != nil {
		return nil, "", bsoncore.Value{}, err
	}
	ns, err := collArg(env, cmd, name)
	if err != nil {
		return nil, "", bsoncore.Value{}, err
	}
	v, err := requiredField(cmd, name, field, t)
	return svc, ns, v, err
}

// toArg reads the required full namespace field "to".
func toArg(cmd bsoncore.Document, name string) (string, error) {
	v, err := requiredField(cmd, name, "to", bsoncore.TypeString)
	if err != nil {
		return "", err
	}
	to := v.StringValue()
	if err := catalog.ValidateNS(to); err != nil || !strings.Contains(to, ".") {
		return "", mongoerr.Newf(mongoerr.InvalidNamespace, "Invalid target namespace: %s", to)
	}
	return to, nil
}

// renameParticipantArgs is a rename participant command's prelude: a shard, and the
// namespaces {<name>: coll (of the request's database), to}.
func renameParticipantArgs(env *service.Env, cmd bsoncore.Document, name string) (from, to string, err error) {
	if _, err := requireShard(env, name); err != nil {
		return "", "", err
	}
	if from, err = collArg(env, cmd, name); err != nil {
		return "", "", err
	}
	to, err = toArg(cmd, name)
	return from, to, err
}

// runShardsvrRenameCollection ({_shardsvrRenameCollection: coll, to, dropTarget, stayTemp})
// renames through the rename coordinator and answers once it is done everywhere.
func runShardsvrRenameCollection(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrRenameCollection"
	svc, err := ddlCoordinatorsOf(env, name)
	if err != nil {
		return nil, err
	}
	from, err := collArg(env, cmd, name)
	if err != nil {
		return nil, err
	}
	to, err := toArg(cmd, name)
	if err != nil {
		return nil, err
	}
	req := ddl.RenameRequest{From: from, To: to}
	for f, dst := range map[string]*bool{"dropTarget": &req.DropTarget, "stayTemp": &req.StayTemp} {
		if v := lookup(cmd, f); v.Type != 0 {
			b, ok := v.BooleanOK()
			if !ok {
				return nil, typeMismatch(name, f, v.Type, "bool")
			}
			*dst = b
		}
	}
	if err := svc.RenameCollection(ctx, req); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// criticalSectionsColl holds the DDL critical sections of a shard (MongoDB's recoverable
// critical sections, config.collection_critical_sections): a participant that restarts, or a
// new primary, blocks the namespace again before it takes writes (recoverDDLCriticalSections)
// until the coordinator releases it.
const criticalSectionsColl = "collection_critical_sections"

// enterDDLCriticalSection persists ns's section (the caller waits for majority) and blocks
// ns's versioned reads and writes. Entering again with the section held is a no-op.
func enterDDLCriticalSection(ctx context.Context, run ddl.RunFunc, rt *filtering.Runtime, ns, reason string) error {
	upd := bsoncore.NewDocumentBuilder().AppendString("update", criticalSectionsColl).
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", bsoncore.NewDocumentBuilder().AppendString("_id", ns).Build()).
			AppendDocument("u", bsoncore.NewDocumentBuilder().AppendDocument("$set", bsoncore.NewDocumentBuilder().
				AppendString("reason", reason).AppendBoolean("blockReads", true).Build()).Build()).
			AppendBoolean("upsert", true).Build()).Build()).Build()
	if _, err := run(ctx, "config", upd); err != nil {
		return fmt.Errorf("persist the critical section of %s: %w", ns, err)
	}
	if held, _ := rt.InCriticalSection(ns); !held {
		if err := rt.EnterCriticalSection(ns, reason); err != nil {
			return err
		}
	}
	rt.PromoteCriticalSectionToBlockReads(ns)
	return nil
}

// exitDDLCriticalSection removes ns's persisted section and releases it.
func exitDDLCriticalSection(ctx context.Context, run ddl.RunFunc, rt *filtering.Runtime, ns string) error {
	del := bsoncore.NewDocumentBuilder().AppendString("delete", criticalSectionsColl).
		AppendArray("deletes", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", bsoncore.NewDocumentBuilder().AppendString("_id", ns).Build()).
			AppendInt32("limit", 1).Build()).Build()).Build()
	if _, err := run(ctx, "config", del); err != nil {
		return fmt.Errorf("remove the critical section of %s: %w", ns, err)
	}
	rt.ExitCriticalSection(ns)
	return nil
}

// recoverDDLCriticalSections re-enters every persisted DDL critical section, read from the
// node's own storage (it runs as the node ends its drain, before it takes writes: it cannot
// run commands yet).
func recoverDDLCriticalSections(st *service.State) {
	rt := filtering.Of(st.DB)
	if rt == nil {
		return
	}
	docs, err := (&migration.Local{DB: st.DB}).ScanAll(context.Background(), "config."+criticalSectionsColl)
	if err != nil {
		st.Logger.Error("Failed to read the DDL critical sections at step-up", "error", err.Error())
		return
	}
	for _, d := range docs {
		ns, ok := d.Lookup("_id").StringValueOK()
		if !ok {
			continue
		}
		reason, _ := d.Lookup("reason").StringValueOK()
		if held, _ := rt.InCriticalSection(ns); !held {
			_ = rt.EnterCriticalSection(ns, reason)
		}
		rt.PromoteCriticalSectionToBlockReads(ns)
		st.Logger.Info("Recovered a DDL critical section", "namespace", ns, "reason", reason)
	}
}

// renameReason is the critical sections' reason (MongoDB's getCriticalSectionReasonForRename).
func renameReason(from, to string) string {
	return fmt.Sprintf("{ command: \"rename\", from: \"%s\", to: \"%s\" }", from, to)
}

// runShardsvrRenameCollectionParticipant is one shard's part of a rename
// ({_shardsvrRenameCollectionParticipant: coll, to, dropTarget, sourceUUID}): block versioned
// CRUD on both namespaces (the critical sections stay until the unblock), drop the local
// target unless it already is the renamed source, rename the local source when it is the
// incarnation being renamed, and point its range deletion tasks at the new name.
func runShardsvrRenameCollectionParticipant(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrRenameCollectionParticipant"
	from, to, err := renameParticipantArgs(env, cmd, name)
	if err != nil {
		return nil, err
	}
	v, err := requiredField(cmd, name, "sourceUUID", bsoncore.TypeBinary)
	if err != nil {
		return nil, err
	}
	sub, data, _ := v.BinaryOK()
	if sub != 4 || len(data) != 16 {
		return nil, typeMismatch(name, "sourceUUID", v.Type, "uuid")
	}
	source := catalog.UUID(data)
	rt, _, err := shardRuntime(env)
	if err != nil {
		return nil, err
	}
	run := ddl.RunFunc(internalRunner(env.State, env.Registry))
	reason := renameReason(from, to)
	for _, ns := range []string{from, to} {
		if err := enterDDLCriticalSection(ctx, run, rt, ns, reason); err != nil {
			return nil, err
		}
	}
	fromDB, fromColl, _ := strings.Cut(from, ".")
	toDB, toColl, _ := strings.Cut(to, ".")
	target, err := ddl.LocalCollection(ctx, run, toDB, toColl)
	if err != nil {
		return nil, err
	}
	if target.Exists() && target.UUID() == source {
		return waitMajority(ctx, env, emptyDoc) // renamed before
	}
	local, err := ddl.LocalCollection(ctx, run, fromDB, fromColl)
	if err != nil {
		return nil, err
	}
	renaming := local.Exists() && local.UUID() == source
	// A shard that renames its copy drops the target in the same command (the rename's
	// entry then carries dropTarget, which change streams report); one without a copy of
	// the source drops the target alone.
	if target.Exists() && !renaming {
		if _, err := run(ctx, toDB, bsoncore.NewDocumentBuilder().AppendString("drop", toColl).Build()); err != nil && !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
			return nil, fmt.Errorf("drop the rename's target %s on this shard: %w", to, err)
		}
	}
	if renaming {
		if _, err := run(ctx, "admin", bsoncore.NewDocumentBuilder().AppendString("renameCollection", from).
			AppendString("to", to).AppendBoolean("dropTarget", true).Build()); err != nil {
			return nil, fmt.Errorf("rename %s to %s on this shard: %w", from, to, err)
		}
	}
	upd := bsoncore.NewDocumentBuilder().AppendString("update", "rangeDeletions").
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", bsoncore.NewDocumentBuilder().AppendBinary("collectionUuid", 4, source[:]).Build()).
			AppendDocument("u", bsoncore.NewDocumentBuilder().AppendDocument("$set",
				bsoncore.NewDocumentBuilder().AppendString("nss", to).Build()).Build()).
			AppendBoolean("multi", true).Build()).Build()).Build()
	if _, err := run(ctx, "config", upd); err != nil {
		return nil, fmt.Errorf("move the range deletion tasks of %s to %s: %w", from, to, err)
	}
	return waitMajority(ctx, env, emptyDoc)
}

// runShardsvrRenameCollectionUnblockParticipant ({..: coll, to}) refreshes both namespaces'
// filtering metadata from the renamed catalog and releases their critical sections.
func runShardsvrRenameCollectionUnblockParticipant(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrRenameCollectionUnblockParticipant"
	from, to, err := renameParticipantArgs(env, cmd, name)
	if err != nil {
		return nil, err
	}
	rt, _, err := shardRuntime(env)
	if err != nil {
		return nil, err
	}
	// The refreshes first: a request let through must meet the new metadata.
	for _, ns := range []string{from, to} {
		if _, err := rt.RefreshCollection(ctx, ns); err != nil {
			return nil, fmt.Errorf("refresh %s after the rename: %w", ns, err)
		}
	}
	run := ddl.RunFunc(internalRunner(env.State, env.Registry))
	for _, ns := range []string{from, to} {
		if err := exitDDLCriticalSection(ctx, run, rt, ns); err != nil {
			return nil, err
		}
	}
	return waitMajority(ctx, env, emptyDoc)
}

// runShardsvrDropDatabase ({_shardsvrDropDatabase: 1} on the database) drops it through the
// drop-database coordinator and answers once it is gone everywhere.
func runShardsvrDropDatabase(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrDropDatabase"
	svc, err := ddlCoordinatorsOf(env, name)
	if err != nil {
		return nil, err
	}
	switch env.DB {
	case "admin", "config", "local":
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "Cannot drop the %s database", env.DB)
	}
	if err := svc.DropDatabase(ctx, env.DB); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// runShardsvrDropDatabaseParticipant drops the request's database on this shard (none is
// fine), majority.
func runShardsvrDropDatabaseParticipant(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrDropDatabaseParticipant"
	if _, err := requireShard(env, name); err != nil {
		return nil, err
	}
	switch env.DB {
	case "admin", "config", "local":
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "Cannot drop the %s database", env.DB)
	}
	run := internalRunner(env.State, env.Registry)
	dctx := ctx
	if fm, _ := lookup(cmd, "fromMigrate").BooleanOK(); fm {
		// A shard other than the primary: change streams report the primary's drops only.
		dctx = withDropFromMigrate(ctx)
	}
	if _, err := run(dctx, env.DB, bsoncore.NewDocumentBuilder().AppendInt32("dropDatabase", 1).Build()); err != nil && !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
		return nil, fmt.Errorf("drop database %s on this shard: %w", env.DB, err)
	}
	return waitMajority(ctx, env, emptyDoc)
}
