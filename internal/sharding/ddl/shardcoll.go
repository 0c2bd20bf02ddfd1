package ddl

// The create-collection coordinator (MongoDB 7.0's CreateCollectionCoordinator, spec:
// sharding.md "Sharding DDL Coordinator", "Sharding a collection"): shardCollection runs on
// the database's primary shard under the database's and the namespace's DDL locks, with its
// request in a state document, so a new primary resumes it and the router's retry joins it.
// Its one phase (Coordinator.CreateCollection) is idempotent: every step before the config
// server's commit (local create, the shard key index, the participants' collections) is
// redone harmlessly, and the commit (_configsvrCommitShardCollection) happens at most once,
// answering created: false to a repeat. A request with other options for a namespace being
// sharded fails with ConflictingOperationInProgress; a validation error (a bad key, an
// index that cannot back it) ends the operation and removes its document.

import (
	"bytes"
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/primaryonly"
	"humongo/internal/sharding/routing"
)

const opCreateCollection = "createCollection"

// ShardCollection shards req.NS through its coordinator on this shard, the database's
// primary shard (a request identical to a running one joins it), and answers the
// collection's UUID and version once it is sharded.
func (s *CoordinatorService) ShardCollection(ctx context.Context, req CreateRequest) (CreateResponse, error) {
	db, _, _ := strings.Cut(req.NS, ".")
	id := coordinatorDocID(req.NS, opCreateCollection)
	b := bsoncore.NewDocumentBuilder().AppendDocument("_id", id).AppendDocument("shardKey", req.Key).
		AppendBoolean("unique", req.Unique).AppendInt64("numInitialChunks", req.NumInitialChunks).
		AppendBoolean("presplitHashedZones", req.Presplit)
	if req.Collation != nil {
		b.AppendDocument("collation", req.Collation)
	}
	if _, err := s.runCoordinator(ctx, db, b.Build()); err != nil {
		return CreateResponse{}, err
	}
	remote, err := s.cfg.Remote()
	if err != nil {
		return CreateResponse{}, err
	}
	// The coordinator (this request's or the one it joined) committed: what the config
	// server holds is the answer.
	coll, chunks, sharded, err := remote.Catalog.Collection(ctx, req.NS, nil)
	if err != nil {
		return CreateResponse{}, err
	}
	if !sharded {
		return CreateResponse{}, mongoerr.Newf(mongoerr.NamespaceNotFound, "collection %s was dropped while being sharded", req.NS)
	}
	rt, err := routing.New(coll.UUID, coll.Pattern, coll.Gen, chunks)
	if err != nil {
		return CreateResponse{}, err
	}
	return CreateResponse{UUID: coll.UUID, CollectionVersion: rt.Version()}, nil
}

// checkPrimaryShard fails with StaleDbVersion unless this shard is db's primary shard.
func (s *CoordinatorService) checkPrimaryShard(ctx context.Context, remote *Remote, db string) error {
	dbEntry, err := remote.Catalog.Database(ctx, db)
	if err != nil {
		return err
	}
	if self := s.cfg.Self(); dbEntry.Primary != self {
		return mongoerr.Newf(mongoerr.StaleDbVersion,
			"the primary shard of database %s is %s, not this shard (%s)", db, dbEntry.Primary, self)
	}
	return nil
}

// coordinatorDocID is a state document's _id: {namespace, operationType}.
func coordinatorDocID(ns, op string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("namespace", ns).AppendString("operationType", op).Build()
}

type createCollection struct {
	coordinator
	doc bsoncore.Document // the request's fields, compared by CheckJoin
	req CreateRequest
}

func newCreateCollection(s *CoordinatorService, doc bsoncore.Document) (*createCollection, error) {
	doc = append(bsoncore.Document(nil), doc...)
	id, _ := doc.Lookup("_id").DocumentOK()
	ns, _ := id.Lookup("namespace").StringValueOK()
	db, _, _ := strings.Cut(ns, ".")
	c := &createCollection{coordinator: newCoordinator(s, doc, []string{db}, []string{ns}), doc: doc}
	c.req.NS = ns
	c.req.Key, _ = doc.Lookup("shardKey").DocumentOK()
	c.req.Unique, _ = doc.Lookup("unique").BooleanOK()
	c.req.NumInitialChunks, _ = doc.Lookup("numInitialChunks").AsInt64OK()
	c.req.Presplit, _ = doc.Lookup("presplitHashedZones").BooleanOK()
	if coll, ok := doc.Lookup("collation").DocumentOK(); ok {
		c.req.Collation = coll
	}
	return c, nil
}

// CheckJoin: the same options join, others conflict (MongoDB's checkIfOptionsConflict).
func (c *createCollection) CheckJoin(doc bsoncore.Document) error {
	for _, f := range []string{"shardKey", "unique", "numInitialChunks", "presplitHashedZones", "collation"} {
		a, b := c.doc.Lookup(f), doc.Lookup(f)
		if a.Type != b.Type || !bytes.Equal(a.Data, b.Data) {
			return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
				"Another create collection with different arguments is already running for the same namespace %s", c.req.NS)
		}
	}
	return nil
}

// Run: a non-retriable error is a refusal (nothing committed): the operation ends.
func (c *createCollection) Run(ctx context.Context) error {
	return c.run(ctx, opCreateCollection, []primaryonly.Phase{
		{Name: "commit", Run: c.s.retryingRetriable(c.ns, opCreateCollection, c.create)},
	}, func(ctx context.Context, phase string) error { return c.checkpointPhase(ctx, phase, nil) }, "commit")
}

func (c *createCollection) create(ctx context.Context) error {
	if err := fpCreateHang.PauseWhileSet(ctx); err != nil {
		return err
	}
	_, err := c.s.cfg.Shard.CreateCollection(ctx, c.s.cfg.Self(), c.req)
	return err
}
