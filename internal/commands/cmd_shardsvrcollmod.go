package commands

// _shardsvrCollMod and _shardsvrCreateUnshardedCollection (the database primary shard's
// collMod and unsharded-create coordinators, resumable: spec sharding.md "Sharding DDL
// Coordinator", internal/sharding/ddl collmod.go and createunsharded.go).

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addShardsvrCollMod(r *service.Registry) {
	add(r, &service.Command{Name: "_shardsvrCollMod", Auth: service.AuthInternal, Handler: runShardsvrCollMod,
		Help:      "Internal command, which is exported by the sharding server. Do not call directly. Modifies a collection's options on the shards.",
		Secondary: service.SecondaryNever, Writes: true})
	add(r, &service.Command{Name: "_shardsvrCreateUnshardedCollection", Auth: service.AuthInternal, Handler: runShardsvrCreateUnsharded,
		Help:      "Internal command, which is exported by the sharding server. Do not call directly. Creates an unsharded collection or a view on the database's primary shard under its DDL locks.",
		Secondary: service.SecondaryNever, Writes: true})
}

// runShardsvrCreateUnsharded ({_shardsvrCreateUnshardedCollection: coll, createRequest:
// {...}} on the collection's database) creates the collection or view through its
// coordinator; the reply is create's ({}).
func runShardsvrCreateUnsharded(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrCreateUnshardedCollection"
	svc, ns, v, err := coordinatorArgs(env, cmd, name, "createRequest", bsoncore.TypeEmbeddedDocument)
	if err != nil {
		return nil, err
	}
	if err := svc.CreateUnsharded(ctx, ns, v.Document()); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// runShardsvrCollMod ({_shardsvrCollMod: coll, collModRequest: {...}} on the collection's
// database) runs the collMod coordinator and answers once every shard it concerns answered:
// {sharded, replies: [{shard, reply}]}, from which the router builds mongos's reply ({raw:
// {<shard's connection string>: reply}}, the primary's fields first for an unsharded one).
func runShardsvrCollMod(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "_shardsvrCollMod"
	svc, ns, v, err := coordinatorArgs(env, cmd, name, "collModRequest", bsoncore.TypeEmbeddedDocument)
	if err != nil {
		return nil, err
	}
	res, err := svc.CollMod(ctx, ns, v.Document())
	if err != nil {
		return nil, err
	}
	arr := bsoncore.NewArrayBuilder()
	for _, r := range res.Replies {
		arr.AppendDocument(bsoncore.NewDocumentBuilder().AppendString("shard", r.Shard).AppendDocument("reply", r.Reply).Build())
	}
	return bsoncore.NewDocumentBuilder().AppendBoolean("sharded", res.Sharded).AppendArray("replies", arr.Build()).Build(), nil
}
