package ddl

// The unsharded create (spec: sharding.md "Sharding DDL Coordinator"): a collection or view
// created through the router is created on the database's primary shard by a coordinator
// with one phase, so that it holds the database's and the namespace's DDL locks: a create
// cannot interleave with a drop, rename or shardCollection of the same namespace (MongoDB
// 8.0 runs it through its CreateCollectionCoordinator the same way; 7.0 relies on the
// shard's collection lock only). A coordinator rather than the bare locks: the service
// reacquires its instances' locks when the node steps up, which needs every holder to be
// one of its instances (a bare holder could still hold a lock at the rebuild), and an
// identical concurrent create joins instead of racing. The phase is the shard's own create,
// which is idempotent (the same options again succeed), so a resumed one runs it again.

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/primaryonly"
)

const opCreateUnsharded = "create"

// CreateUnsharded creates ns (a collection or a view) with request (create's options,
// without its first field) through a coordinator on this shard, ns's database's primary
// shard, and waits for its end.
func (s *CoordinatorService) CreateUnsharded(ctx context.Context, ns string, request bsoncore.Document) error {
	db, _, _ := strings.Cut(ns, ".")
	_, err := s.runCoordinator(ctx, db, bsoncore.NewDocumentBuilder().
		AppendDocument("_id", coordinatorDocID(ns, opCreateUnsharded)).AppendDocument("createRequest", request).Build())
	return err
}

type createUnsharded struct {
	coordinator
	request bsoncore.Document
}

func newCreateUnsharded(s *CoordinatorService, doc bsoncore.Document) (*createUnsharded, error) {
	doc = append(bsoncore.Document(nil), doc...)
	id, _ := doc.Lookup("_id").DocumentOK()
	ns, _ := id.Lookup("namespace").StringValueOK()
	db, _, _ := strings.Cut(ns, ".")
	c := &createUnsharded{coordinator: newCoordinator(s, doc, []string{db}, []string{ns})}
	c.request, _ = doc.Lookup("createRequest").DocumentOK()
	return c, nil
}

// CheckJoin: only the same request joins (MongoDB 8.0's message).
func (c *createUnsharded) CheckJoin(doc bsoncore.Document) error {
	if req, _ := doc.Lookup("createRequest").DocumentOK(); bsonutil.CompareDocuments(req, c.request) != 0 {
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress,
			"Another create collection with different arguments is already running for the same namespace %s", c.ns)
	}
	return nil
}

// Run: the create's refusal (different options, bad ones) ends the operation.
func (c *createUnsharded) Run(ctx context.Context) error {
	return c.run(ctx, opCreateUnsharded, []primaryonly.Phase{
		{Name: "create", Run: c.s.retryingRetriable(c.ns, opCreateUnsharded, c.create)},
	}, func(ctx context.Context, phase string) error { return c.checkpointPhase(ctx, phase, nil) }, "create")
}

func (c *createUnsharded) create(ctx context.Context) error {
	db, coll, _ := strings.Cut(c.ns, ".")
	b := bsoncore.NewDocumentBuilder().AppendString("create", coll)
	elems, _ := c.request.Elements()
	for _, e := range elems {
		b.AppendValue(e.Key(), e.Value())
	}
	if _, err := c.s.cfg.Local(ctx, db, b.Build()); err != nil {
		return err
	}
	return c.s.cfg.WaitMajority(ctx)
}
