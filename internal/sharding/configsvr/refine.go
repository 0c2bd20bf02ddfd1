package configsvr

// Committing a refined shard key (spec: sharding.md "Sharding DDL Coordinator"; MongoDB 7.0's
// ShardingCatalogManager::refineCollectionShardKey): the collection keeps its UUID and its
// chunks their major and minor versions, but gets the new key, a new epoch and timestamp (so
// every router and shard reloads it), and every chunk and zone bound gains the new fields:
// MinKey, but MaxKey where the bound is the global maximum. One applyOps, under the commit
// lock.

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

// RefineRequest is a refine's commit: the incarnation (UUID) whose key becomes Key, with
// the generation the coordinator chose (stable across its retries).
type RefineRequest struct {
	NS   string
	UUID [16]byte
	Key  bsoncore.Document
	Gen  routing.Generation
}

// RefineShardKey commits req. Done before (the entry already has the key) is a success.
func (c *Committer) RefineShardKey(ctx context.Context, req RefineRequest) error {
	newKey, err := shardkey.Parse(req.Key)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	doc, found, err := findOne(ctx, c.Run, "collections", bsoncore.NewDocumentBuilder().AppendString("_id", req.NS).Build(), nil)
	if err != nil {
		return err
	}
	if !found {
		return mongoerr.Newf(mongoerr.NamespaceNotSharded, "refineCollectionShardKey namespace %s is not sharded", req.NS)
	}
	coll, err := configclient.ParseCollection(doc)
	if err != nil {
		return err
	}
	if coll.UUID != req.UUID {
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress, "collection %s was dropped and created again while its shard key was being refined", req.NS)
	}
	if bsonutil.CompareDocuments(coll.Pattern.Doc(), newKey.Doc()) == 0 {
		return nil
	}
	oldFields := coll.Pattern.Fields()
	added := newKey.Fields()[len(oldFields):]
	extend := func(bound bsoncore.Document) bsoncore.Document {
		t := bsoncore.TypeMinKey
		if bsonutil.CompareDocuments(bound, coll.Pattern.GlobalMax()) == 0 {
			t = bsoncore.TypeMaxKey
		}
		out := append(bsoncore.Document(nil), bound[:len(bound)-1]...)
		for _, f := range added {
			out = bsoncore.AppendHeader(out, t, f)
		}
		out = append(out, 0)
		return bsoncore.UpdateLength(out, 0, int32(len(out)))
	}
	chunkDocs, err := FindAll(ctx, c.Run, "chunks", bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, coll.UUID[:]).Build(), nil)
	if err != nil {
		return err
	}
	// The entry: new key, generation and lastmod; migrations allowed again (the coordinator
	// stopped them on the old entry).
	b := bsoncore.NewDocumentBuilder()
	elems, _ := doc.Elements()
	for _, e := range elems {
		switch e.Key() {
		case "key", "lastmodEpoch", "lastmod", "timestamp", "allowMigrations":
		default:
			b.AppendValue(e.Key(), e.Value())
		}
	}
	b.AppendDocument("key", newKey.Doc()).AppendObjectID("lastmodEpoch", req.Gen.Epoch).
		AppendDateTime("lastmod", time.Now().UnixMilli()).AppendTimestamp("timestamp", req.Gen.Timestamp.T, req.Gen.Timestamp.I)
	ops := []bsoncore.Document{replaceOp("config.collections", bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, req.NS)}, b.Build())}
	for _, d := range chunkDocs {
		ch, err := routing.ParseConfigChunk(d, coll.Gen)
		if err != nil {
			return err
		}
		ch.Min, ch.Max = extend(ch.Min), extend(ch.Max)
		ops = append(ops, updateOp("config.chunks", ch.ID, ch.ConfigDoc()))
	}
	tags, err := FindAll(ctx, c.Run, "tags", bsoncore.NewDocumentBuilder().AppendString("ns", req.NS).Build(), nil)
	if err != nil {
		return err
	}
	for _, t := range tags {
		min, _ := t.Lookup("min").DocumentOK()
		max, _ := t.Lookup("max").DocumentOK()
		tb := bsoncore.NewDocumentBuilder()
		tElems, _ := t.Elements()
		for _, e := range tElems {
			switch e.Key() {
			case "min":
				tb.AppendDocument("min", extend(min))
			case "max":
				tb.AppendDocument("max", extend(max))
			default:
				tb.AppendValue(e.Key(), e.Value())
			}
		}
		ops = append(ops, replaceOp("config.tags", t.Lookup("_id"), tb.Build()))
	}
	return c.apply(ctx, ops)
}

// replaceOp is an applyOps update replacing the document whose _id is id.
func replaceOp(ns string, id bsoncore.Value, doc bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("op", "u").AppendString("ns", ns).AppendBoolean("b", false).
		AppendDocument("o", doc).AppendDocument("o2", bsoncore.NewDocumentBuilder().AppendValue("_id", id).Build()).Build()
}
