package migration

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
)

// nodeSteps is the Coordinator's Steps on a real shard: local documents through the node's
// own commands (majority), the other shard's through its primary, chunks from the config
// server.
type nodeSteps struct{ s *Service }

var majorityWC = bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()

// writeOK turns a write command's reply with writeErrors into an error.
func writeOK(reply bsoncore.Document, err error) (bsoncore.Document, error) {
	if err != nil {
		return nil, err
	}
	if arr, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		vals, _ := arr.Values()
		if len(vals) > 0 {
			d, _ := vals[0].DocumentOK()
			code, _ := d.Lookup("code").AsInt64OK()
			msg, _ := d.Lookup("errmsg").StringValueOK()
			return nil, mongoerr.New(mongoerr.Code(code), msg)
		}
	}
	if wce, ok := reply.Lookup("writeConcernError").DocumentOK(); ok {
		code, _ := wce.Lookup("code").AsInt64OK()
		msg, _ := wce.Lookup("errmsg").StringValueOK()
		return nil, mongoerr.New(mongoerr.Code(code), msg)
	}
	return reply, nil
}

// runOn runs a config-database write on shard (this node in-process, or another's primary)
// and waits for majority.
func (n nodeSteps) runOn(ctx context.Context, shard string, cmd bsoncore.Document) error {
	if shard == n.s.Self() {
		if _, err := writeOK(n.s.LocalRun(ctx, "config", cmd)); err != nil {
			return err
		}
		return n.s.WaitMajority(ctx)
	}
	withWC := append(bsoncore.Document(nil), cmd[:len(cmd)-1]...)
	withWC = bsoncore.AppendDocumentElement(withWC, "writeConcern", majorityWC)
	withWC = append(withWC, 0)
	withWC = bsoncore.UpdateLength(withWC, 0, int32(len(withWC)))
	_, err := writeOK(n.s.Cluster.RunOnShard(ctx, shard, "config", withWC))
	return err
}

func insertCmd(coll string, doc bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("insert", coll).
		AppendArray("documents", bsoncore.NewArrayBuilder().AppendDocument(doc).Build()).Build()
}

func idFilter(id catalog.UUID) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendBinary("_id", 4, id[:]).Build()
}

func updateCmd(coll string, q, u bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("update", coll).AppendArray("updates", bsoncore.NewArrayBuilder().
		AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("q", q).AppendDocument("u", u).Build()).Build()).Build()
}

func deleteCmd(coll string, q bsoncore.Document) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("delete", coll).AppendArray("deletes", bsoncore.NewArrayBuilder().
		AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("q", q).AppendInt32("limit", 1).Build()).Build()).Build()
}

func (n nodeSteps) InsertCoordinator(ctx context.Context, d CoordinatorDoc) error {
	return n.runOn(ctx, n.s.Self(), insertCmd("migrationCoordinators", d.Doc()))
}

func (n nodeSteps) UpdateDecision(ctx context.Context, id catalog.UUID, dec Decision) error {
	u := bsoncore.NewDocumentBuilder().AppendDocument("$set", bsoncore.NewDocumentBuilder().AppendString("decision", string(dec)).Build()).Build()
	return n.runOn(ctx, n.s.Self(), updateCmd("migrationCoordinators", idFilter(id), u))
}

func (n nodeSteps) DeleteCoordinator(ctx context.Context, id catalog.UUID) error {
	return n.runOn(ctx, n.s.Self(), deleteCmd("migrationCoordinators", idFilter(id)))
}

func (n nodeSteps) InsertRangeDeletion(ctx context.Context, t RangeDeletionTask) error {
	return n.runOn(ctx, n.s.Self(), insertCmd("rangeDeletions", t.Doc()))
}

func (n nodeSteps) DeleteRangeDeletion(ctx context.Context, shard string, id catalog.UUID) error {
	return n.runOn(ctx, shard, deleteCmd("rangeDeletions", idFilter(id)))
}

func (n nodeSteps) MarkRangeDeletionReady(ctx context.Context, shard string, id catalog.UUID) error {
	u := bsoncore.NewDocumentBuilder().AppendDocument("$unset", bsoncore.NewDocumentBuilder().AppendString("pending", "").Build()).Build()
	if err := n.runOn(ctx, shard, updateCmd("rangeDeletions", idFilter(id), u)); err != nil {
		return err
	}
	if shard == n.s.Self() && n.s.RangeDeleter != nil {
		if d := n.s.RangeDeleter(); d != nil {
			d.Kick() // another shard's deleter finds its task on its next pass
		}
	}
	return nil
}

func (n nodeSteps) ChunkOwner(ctx context.Context, ns string, uuid catalog.UUID, min, max bsoncore.Document) (string, error) {
	return ChunkOwner(ctx, n.s.Cluster, uuid, min)
}

func (n nodeSteps) EnsureChunkVersionIsGreaterThan(ctx context.Context, ns string, uuid catalog.UUID, min, max bsoncore.Document, v routing.ChunkVersion) error {
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendInt32Element(doc, "_configsvrEnsureChunkVersionIsGreaterThan", 1)
	doc = bsoncore.AppendDocumentElement(doc, "minKey", min)
	doc = bsoncore.AppendDocumentElement(doc, "maxKey", max)
	doc = v.AppendShardVersion(doc, "version")
	doc = bsoncore.AppendBinaryElement(doc, "collectionUUID", 4, uuid[:])
	doc = bsoncore.AppendStringElement(doc, "nss", ns)
	doc = bsoncore.AppendDocumentElement(doc, "writeConcern", majorityWC)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	_, err := n.s.Cluster.RunOnConfig(ctx, "admin", doc)
	return err
}

func (n nodeSteps) Refresh(ctx context.Context, ns string) error {
	_, err := n.s.Filtering.RefreshCollection(ctx, ns)
	return err
}

// ErrCollectionGone is ChunkOwner's answer for a collection without chunks: it was dropped
// (chunks tile a sharded collection's key space while it exists).
var ErrCollectionGone = errors.New("the collection is no longer sharded under this UUID")

// ChunkOwner reads from the config server the shard owning the chunk of collection uuid
// that contains key min.
func ChunkOwner(ctx context.Context, c Cluster, uuid catalog.UUID, min bsoncore.Document) (string, error) {
	filter := bsoncore.NewDocumentBuilder().AppendBinary("uuid", 4, uuid[:]).
		AppendDocument("min", bsoncore.NewDocumentBuilder().AppendDocument("$lte", min).Build()).Build()
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", "chunks").AppendDocument("filter", filter).
		AppendDocument("sort", bsoncore.NewDocumentBuilder().AppendInt32("min", -1).Build()).AppendInt32("limit", 1).
		AppendBoolean("singleBatch", true).
		AppendDocument("readConcern", bsoncore.NewDocumentBuilder().AppendString("level", "majority").Build()).Build()
	reply, err := c.RunOnConfig(ctx, "config", cmd)
	if err != nil {
		return "", err
	}
	arr, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return "", fmt.Errorf("no chunk of collection %s contains the migrated range: %w", uuid, ErrCollectionGone)
	}
	d, _ := vals[0].DocumentOK()
	shard, _ := d.Lookup("shard").StringValueOK()
	return shard, nil
}
