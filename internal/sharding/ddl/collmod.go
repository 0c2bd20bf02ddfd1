package ddl

// The collMod coordinator (MongoDB 7.0's CollModCoordinator, spec: sharding.md "Sharding DDL
// Coordinator"): collMod of a sharded or unsharded collection on the database's primary
// shard, under the DDL locks (serialized with drop, rename, refine... of the namespace),
// resumably. Phases, each checkpointed (majority) before it runs and idempotent:
//
//   - checkPreconditions: whether the collection is sharded (config.collections) and its
//     UUID, recorded with the next checkpoint;
//   - freezeMigrations: a sharded collection's migrations stop (allowMigrations: false), so
//     the set of shards owning chunks cannot change while they are modified;
//   - updateShards: the local collMod with the request on every shard owning chunks of a
//     sharded collection (the primary shard first when it owns some), on the primary shard
//     alone for an unsharded one (views live there only); each shard's reply is kept and
//     recorded with the next checkpoint, so a resumed coordinator answers with it;
//   - unfreeze: the migrations resume.
//
// As in MongoDB, a shard not owning chunks is not modified: a shard that receives its first
// chunk takes the collection's options and indexes from the donor.
//
// A shard refusing the collMod (bad options, a duplicate on a unique conversion) ends the
// operation with that shard's error, the first one, after the migrations resumed; the
// shards before it in the order keep the change (MongoDB does not roll a collMod back
// either), the later ones never saw it. collMod is idempotent, so the same request retried
// once the cause is gone makes the shards agree again. An error that says nothing about the
// request (a network error, a shard's failover) is retried instead; a failover of this shard
// resumes the operation at its checkpointed phase, and updateShards runs the collMod again
// on every owner (it is idempotent).

import (
	"context"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/primaryonly"
	"humongo/internal/sharding/routing"
)

const opCollMod = "collMod"

// CollModShardReply is one shard's reply to a coordinator's collMod.
type CollModShardReply struct {
	Shard string
	Reply bsoncore.Document
}

// CollModResult is what a collMod coordinator answers: whether the collection is sharded,
// and the reply of each shard it modified.
type CollModResult struct {
	Sharded bool
	Replies []CollModShardReply
}

// CollMod runs collMod with request (the command's options, without its first field) on
// ns through its coordinator on this shard, ns's database's primary shard (the same request
// joins a running one), and returns the shards' replies.
func (s *CoordinatorService) CollMod(ctx context.Context, ns string, request bsoncore.Document) (CollModResult, error) {
	db, _, _ := strings.Cut(ns, ".")
	h, err := s.runCoordinator(ctx, db, bsoncore.NewDocumentBuilder().
		AppendDocument("_id", coordinatorDocID(ns, opCollMod)).AppendDocument("collModRequest", request).Build())
	if err != nil {
		return CollModResult{}, err
	}
	// Run has returned (Wait saw it), so the instance's fields are settled.
	c := h.Instance().(*collModOp)
	return CollModResult{Sharded: c.sharded, Replies: c.replies}, nil
}

type collModOp struct {
	coordinator
	request bsoncore.Document
	// What checkPreconditions found, and updateShards' replies.
	sharded bool
	uuid    catalog.UUID
	replies []CollModShardReply
}

func newCollMod(s *CoordinatorService, doc bsoncore.Document) (*collModOp, error) {
	doc = append(bsoncore.Document(nil), doc...)
	id, _ := doc.Lookup("_id").DocumentOK()
	ns, _ := id.Lookup("namespace").StringValueOK()
	db, _, _ := strings.Cut(ns, ".")
	c := &collModOp{coordinator: newCoordinator(s, doc, []string{db}, []string{ns})}
	c.request, _ = doc.Lookup("collModRequest").DocumentOK()
	c.sharded, _ = doc.Lookup("sharded").BooleanOK()
	c.uuid = uuidField(doc, "collectionUUID")
	if arr, ok := doc.Lookup("replies").ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			d, _ := v.DocumentOK()
			shard, _ := d.Lookup("shard").StringValueOK()
			reply, _ := d.Lookup("reply").DocumentOK()
			c.replies = append(c.replies, CollModShardReply{Shard: shard, Reply: reply})
		}
	}
	return c, nil
}

// CheckJoin: only the same request joins (MongoDB's checkIfOptionsConflict).
func (c *collModOp) CheckJoin(doc bsoncore.Document) error {
	if req, _ := doc.Lookup("collModRequest").DocumentOK(); bsonutil.CompareDocuments(req, c.request) != 0 {
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"Another collMod for namespace %s is being executed with different parameters: %s", c.ns, c.request)
	}
	return nil
}

func (c *collModOp) Run(ctx context.Context) error {
	return c.run(ctx, opCollMod, []primaryonly.Phase{
		{Name: "checkPreconditions", Run: c.s.retryingRetriable(c.ns, opCollMod, c.checkPreconditions)},
		{Name: "freezeMigrations", Run: c.s.retryingRetriable(c.ns, opCollMod, c.freeze)},
		{Name: "updateShards", Run: c.updateShards},
		{Name: "unfreeze", Run: c.s.retryingAll(c.ns, opCollMod, c.unfreeze)},
	}, c.checkpoint, "checkPreconditions", "freezeMigrations", "updateShards")
}

func (c *collModOp) checkpoint(ctx context.Context, phase string) error {
	if phase == "checkPreconditions" {
		return c.checkpointPhase(ctx, phase, nil)
	}
	return c.checkpointPhase(ctx, phase, func(set *bsoncore.DocumentBuilder) {
		set.AppendBoolean("sharded", c.sharded).AppendBinary("collectionUUID", 4, c.uuid[:])
		if phase == "unfreeze" {
			arr := bsoncore.NewArrayBuilder()
			for _, r := range c.replies {
				arr.AppendDocument(bsoncore.NewDocumentBuilder().AppendString("shard", r.Shard).
					AppendDocument("reply", r.Reply).Build())
			}
			set.AppendArray("replies", arr.Build())
		}
	})
}

func (c *collModOp) checkPreconditions(ctx context.Context) error {
	remote, err := c.s.cfg.Remote()
	if err != nil {
		return err
	}
	entry, err := configCollectionDoc(ctx, remote, c.ns)
	if err != nil {
		return err
	}
	c.sharded = entry != nil
	if c.sharded {
		c.uuid = uuidField(entry, "uuid")
	}
	return nil
}

func (c *collModOp) freeze(ctx context.Context) error {
	if !c.sharded {
		return nil
	}
	remote, err := c.s.cfg.Remote()
	if err != nil {
		return err
	}
	return setAllowMigrations(ctx, remote, c.ns, c.uuid, false)
}

func (c *collModOp) unfreeze(ctx context.Context) error {
	if !c.sharded {
		return nil
	}
	remote, err := c.s.cfg.Remote()
	if err != nil {
		return err
	}
	return setAllowMigrations(ctx, remote, c.ns, c.uuid, true)
}

// updateShards runs the collMod on the owners; a refusal resumes the migrations before it
// ends the operation (the phase is refusable: run removes the state document).
func (c *collModOp) updateShards(ctx context.Context) error {
	err := c.s.retryingRetriable(c.ns, opCollMod, c.collModOwners)(ctx)
	if err == nil || ctx.Err() != nil {
		return err
	}
	if uerr := c.s.retryingAll(c.ns, opCollMod, c.unfreeze)(ctx); uerr != nil {
		return uerr
	}
	return err
}

// owners are the shards the collMod goes to: the primary shard first, then the other
// owners of chunks in id order (for a sharded collection, the primary only if it owns
// chunks).
func (c *collModOp) owners(ctx context.Context, remote *Remote) ([]string, error) {
	self := c.s.cfg.Self()
	if !c.sharded {
		return []string{self}, nil
	}
	coll, chunks, sharded, err := remote.Catalog.Collection(ctx, c.ns, nil)
	if err != nil {
		return nil, err
	}
	if !sharded || coll.UUID != c.uuid {
		// Impossible under the DDL lock (drop and rename take it), so a bug if it happens.
		return nil, mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"collection %s changed while its collMod was running", c.ns)
	}
	rt, err := routing.New(coll.UUID, coll.Pattern, coll.Gen, chunks)
	if err != nil {
		return nil, err
	}
	shards := slices.Clone(rt.Shards())
	slices.SortFunc(shards, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == self:
			return -1
		case b == self:
			return 1
		}
		return strings.Compare(a, b)
	})
	return shards, nil
}

func (c *collModOp) collModOwners(ctx context.Context) error {
	if err := fpCollModHang.PauseWhileSet(ctx); err != nil {
		return err
	}
	remote, err := c.s.cfg.Remote()
	if err != nil {
		return err
	}
	shards, err := c.owners(ctx, remote)
	if err != nil {
		return err
	}
	db, coll, _ := strings.Cut(c.ns, ".")
	b := bsoncore.NewDocumentBuilder().AppendString("collMod", coll)
	elems, _ := c.request.Elements()
	for _, e := range elems {
		b.AppendValue(e.Key(), e.Value())
	}
	cmd := b.Build()
	replies := make([]CollModShardReply, 0, len(shards))
	for _, shard := range shards {
		var reply bsoncore.Document
		if shard == c.s.cfg.Self() {
			if reply, err = c.s.cfg.Local(ctx, db, cmd); err == nil {
				err = c.s.cfg.WaitMajority(ctx)
			}
		} else {
			rs, rerr := remote.Shard(ctx, shard)
			if rerr != nil {
				return rerr
			}
			reply, err = Run(ctx, rs, db, appendField(cmd, "writeConcern", majority()))
		}
		if err != nil {
			return err
		}
		replies = append(replies, CollModShardReply{Shard: shard, Reply: stripReplyNoise(reply)})
	}
	c.replies = replies
	return nil
}

// stripReplyNoise drops a reply's gossip ($clusterTime, operationTime...), which is not the
// shard's answer to keep in the state document.
func stripReplyNoise(reply bsoncore.Document) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	elems, _ := reply.Elements()
	for _, e := range elems {
		if strings.HasPrefix(e.Key(), "$") || e.Key() == "operationTime" {
			continue
		}
		b.AppendValue(e.Key(), e.Value())
	}
	return b.Build()
}
