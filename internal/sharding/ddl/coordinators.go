package ddl

// Resumable DDL coordinators (spec: sharding.md "Sharding DDL Coordinator"; MongoDB 7.0's
// ShardingDDLCoordinatorService and ShardingDDLCoordinator). A coordinator runs on the
// database's primary shard as an instance of a primary-only service (internal/primaryonly)
// whose state documents are in config.system.sharding_ddl_coordinators, _id {namespace,
// operationType}. Before it does anything it takes the DDL locks of its database and then
// of its namespace (in memory on this node: a resumed coordinator takes them again), so
// DDL on one database is serialized on its primary shard; an identical request for the same
// namespace and operation joins the running coordinator, a different one fails with
// ConflictingOperationInProgress. Each phase is checkpointed (majority) before it runs and
// is idempotent, so a new primary resumes the coordinator at the checkpointed phase.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/primaryonly"
	"humongo/internal/sharding/configsvr"
)

// CoordinatorsColl is the state collection (in the config database).
const CoordinatorsColl = "system.sharding_ddl_coordinators"

// CoordinatorServiceConfig is what the coordinators need of their node.
type CoordinatorServiceConfig struct {
	Node primaryonly.Node
	// Local runs a command on this node (in-process); WaitMajority waits until this node's
	// last write is majority committed.
	Local        RunFunc
	WaitMajority func(ctx context.Context) error
	Remote       func() (*Remote, error)
	// Self is this shard's id.
	Self func() string
	// Shard is the shard's non-resumable DDL steps (CreateCollection) the coordinators run.
	Shard *Coordinator
	Log   *slog.Logger
}

// CoordinatorService runs a shard's DDL coordinators.
type CoordinatorService struct {
	cfg   CoordinatorServiceConfig
	svc   *primaryonly.Service
	locks lockTable

	// The simulation's replacements (nil in production: the Remote, timers), and its
	// knobs that break the protocol (all false in production).
	cluster func() (dropCluster, error)
	wait    func(ctx context.Context, d time.Duration) error
	knobs   testingKnobs
}

// testingKnobs break the coordinators on purpose, for the simulation to prove its checker
// catches each break.
type testingKnobs struct {
	dropPhaseUncheckpointed  bool // the drop's phases after freezeCollection run without their checkpoints
	skipParticipantsOnResume bool // a resumed drop does not ask the shards to drop their copies
}

func (s *CoordinatorService) dropCluster() (dropCluster, error) {
	if s.cluster != nil {
		return s.cluster()
	}
	r, err := s.cfg.Remote()
	if err != nil {
		return nil, err
	}
	return remoteCluster{r}, nil
}

// retryWait waits d before a coordinator's step is retried (ctx ends it early).
func (s *CoordinatorService) retryWait(ctx context.Context, d time.Duration) error {
	if s.wait != nil {
		return s.wait(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// StartCoordinatorService starts the service; it follows the node's primary state until
// Stop.
func StartCoordinatorService(cfg CoordinatorServiceConfig) *CoordinatorService {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &CoordinatorService{cfg: cfg}
	s.svc = primaryonly.Start(primaryonly.Config{
		Name: "ShardingDDLCoordinator",
		Node: cfg.Node,
		Load: func(ctx context.Context) ([]bsoncore.Document, error) {
			return cursorAll(ctx, cfg.Local, "config", CoordinatorsColl,
				bsoncore.NewDocumentBuilder().AppendString("find", CoordinatorsColl).Build())
		},
		Insert: func(ctx context.Context, doc bsoncore.Document) error {
			return s.write(ctx, bsoncore.NewDocumentBuilder().AppendString("insert", CoordinatorsColl).
				AppendArray("documents", bsoncore.NewArrayBuilder().AppendDocument(doc).Build()).Build())
		},
		ID:  coordinatorID,
		New: s.newInstance,
		Log: cfg.Log,
	})
	return s
}

// Stop interrupts the coordinators (their documents stay) and ends the service.
func (s *CoordinatorService) Stop() { s.svc.Stop() }

// Running is the number of coordinators running on this node.
func (s *CoordinatorService) Running() int { return s.svc.Len() }

// coordinatorID is a state document's instance id: its operation type and namespace.
func coordinatorID(doc bsoncore.Document) (string, error) {
	id, ok := doc.Lookup("_id").DocumentOK()
	if !ok {
		return "", mongoerr.New(mongoerr.NoSuchKey, "DDL coordinator document without an _id document")
	}
	ns, ok1 := id.Lookup("namespace").StringValueOK()
	op, ok2 := id.Lookup("operationType").StringValueOK()
	if !ok1 || !ok2 {
		return "", mongoerr.Newf(mongoerr.NoSuchKey, "DDL coordinator document with a malformed _id %s", id)
	}
	return op + "|" + ns, nil
}

func (s *CoordinatorService) newInstance(doc bsoncore.Document) (primaryonly.Instance, error) {
	id, _ := doc.Lookup("_id").DocumentOK()
	switch op, _ := id.Lookup("operationType").StringValueOK(); op {
	case opDropCollection:
		return newDropCollection(s, doc)
	case opCreateCollection:
		return newCreateCollection(s, doc)
	case opRenameCollection:
		return newRenameCollection(s, doc)
	case opDropDatabase:
		return newDropDatabase(s, doc)
	case opSetAllowMigrations:
		return newSetAllowMigrations(s, doc)
	case opRefineShardKey:
		return newRefineShardKey(s, doc)
	case opCollMod:
		return newCollMod(s, doc)
	case opCreateUnsharded:
		return newCreateUnsharded(s, doc)
	case opMovePrimary:
		return newMovePrimary(s, doc)
	default:
		return nil, mongoerr.Newf(mongoerr.BadValue, "unknown DDL coordinator operation type %q", op)
	}
}

// write runs a write command on the local config database and waits for majority.
func (s *CoordinatorService) write(ctx context.Context, cmd bsoncore.Document) error {
	if _, err := writeReplyOK(s.cfg.Local(ctx, "config", cmd)); err != nil {
		return err
	}
	return s.cfg.WaitMajority(ctx)
}

// checkpoint records phase (and extra fields) in the coordinator's document, majority.
func (s *CoordinatorService) checkpoint(ctx context.Context, id bsoncore.Document, set bsoncore.Document) error {
	return s.write(ctx, bsoncore.NewDocumentBuilder().AppendString("update", CoordinatorsColl).
		AppendArray("updates", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", bsoncore.NewDocumentBuilder().AppendDocument("_id", id).Build()).
			AppendDocument("u", bsoncore.NewDocumentBuilder().AppendDocument("$set", set).Build()).Build()).Build()).Build())
}

// removeDocument deletes the coordinator's document, majority: the operation is done.
func (s *CoordinatorService) removeDocument(ctx context.Context, id bsoncore.Document) error {
	return s.write(ctx, bsoncore.NewDocumentBuilder().AppendString("delete", CoordinatorsColl).
		AppendArray("deletes", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("q", bsoncore.NewDocumentBuilder().AppendDocument("_id", id).Build()).
			AppendInt32("limit", 1).Build()).Build()).Build())
}

// ddlLocks are the DDL locks an operation takes before it runs: those of its databases, then
// of its namespaces (DDLLockManager's order), each list sorted, so that operations taking
// several cannot deadlock. A resumed operation reacquires them at the service's rebuild
// (primaryonly.Reacquirer), before any new request can take them.
type ddlLocks struct {
	table         *lockTable
	dbs, nss      []string
	reacquired    func() // held since the rebuild; Run takes it over
	reacquiredErr error
}

func newDDLLocks(s *CoordinatorService, dbs, nss []string) ddlLocks {
	return ddlLocks{table: &s.locks, dbs: dbs, nss: nss}
}

func (l *ddlLocks) names() []string {
	var names []string
	for _, group := range [][]string{l.dbs, l.nss} {
		g := slices.Clone(group)
		slices.Sort(g)
		names = append(names, slices.Compact(g)...)
	}
	return names
}

// Reacquire takes the locks at the rebuild: nothing else holds them then (the previous
// term's instances returned before it).
func (l *ddlLocks) Reacquire() error {
	var unlocks []func()
	release := func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
	for _, n := range l.names() {
		u, ok := l.table.tryLock(n)
		if !ok {
			release()
			return mongoerr.Newf(mongoerr.ConflictingOperationInProgress, "the DDL lock of %s is held at the rebuild", n)
		}
		unlocks = append(unlocks, u)
	}
	l.reacquired = release
	return nil
}

// acquire returns the locks: those reacquired at the rebuild, or taken now (waiting for
// their holders).
func (l *ddlLocks) acquire(ctx context.Context) (unlock func(), err error) {
	if u := l.reacquired; u != nil {
		l.reacquired = nil
		return u, nil
	}
	var unlocks []func()
	release := func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
	for _, n := range l.names() {
		u, err := l.table.lock(ctx, n)
		if err != nil {
			release()
			return nil, err
		}
		unlocks = append(unlocks, u)
	}
	return release, nil
}

// writeReplyOK turns a write command's writeErrors or writeConcernError into an error.
func writeReplyOK(reply bsoncore.Document, err error) (bsoncore.Document, error) {
	if err != nil {
		return nil, err
	}
	if err := configsvr.WriteReplyError(reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// lockTable is the node's in-memory DDL locks: one holder per name, waiters queue on a
// channel closed at release.
type lockTable struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

// tryLock takes name's lock if it is free.
func (l *lockTable) tryLock(name string) (unlock func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]chan struct{}{}
	}
	if _, busy := l.held[name]; busy {
		return nil, false
	}
	mine := make(chan struct{})
	l.held[name] = mine
	return l.release(name, mine), true
}

// release returns the unlock function of name's lock held as mine.
func (l *lockTable) release(name string, mine chan struct{}) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.held, name)
			l.mu.Unlock()
			close(mine)
		})
	}
}

func (l *lockTable) lock(ctx context.Context, name string) (unlock func(), err error) {
	for {
		l.mu.Lock()
		if l.held == nil {
			l.held = map[string]chan struct{}{}
		}
		ch, busy := l.held[name]
		if !busy {
			mine := make(chan struct{})
			l.held[name] = mine
			l.mu.Unlock()
			return l.release(name, mine), nil
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the DDL lock of %s: %w", name, context.Cause(ctx))
		}
	}
}

// runCoordinator starts the coordinator of doc (a state document: _id {namespace,
// operationType} and the request's fields) on this shard, which must be db's primary shard,
// or joins the running one for the same id, and waits for its end.
func (s *CoordinatorService) runCoordinator(ctx context.Context, db string, doc bsoncore.Document) (*primaryonly.Handle, error) {
	remote, err := s.cfg.Remote()
	if err != nil {
		return nil, err
	}
	if err := s.checkPrimaryShard(ctx, remote, db); err != nil {
		return nil, err
	}
	h, err := s.svc.GetOrCreate(ctx, doc)
	if err != nil {
		return nil, err
	}
	return h, h.Wait(ctx)
}

// coordinator is what every DDL coordinator keeps: its service, its state document's _id
// and namespace, the phase it reached, and its DDL locks.
type coordinator struct {
	ddlLocks
	s     *CoordinatorService
	id    bsoncore.Document
	ns    string
	phase string
}

// newCoordinator reads a state document's _id, namespace and phase; the locks are those of
// dbs, then of namespaces.
func newCoordinator(s *CoordinatorService, doc bsoncore.Document, dbs, namespaces []string) coordinator {
	id, _ := doc.Lookup("_id").DocumentOK()
	c := coordinator{s: s, id: append(bsoncore.Document(nil), id...)}
	c.ns, _ = id.Lookup("namespace").StringValueOK()
	c.phase, _ = doc.Lookup("phase").StringValueOK()
	c.ddlLocks = newDDLLocks(s, dbs, namespaces)
	return c
}

// checkpointPhase records phase, and the fields extra appends (nil: none), in the state
// document (majority).
func (c *coordinator) checkpointPhase(ctx context.Context, phase string, extra func(b *bsoncore.DocumentBuilder)) error {
	set := bsoncore.NewDocumentBuilder().AppendString("phase", phase)
	if extra != nil {
		extra(set)
	}
	if err := c.s.checkpoint(ctx, c.id, set.Build()); err != nil {
		return err
	}
	c.phase = phase
	return nil
}

// run runs phases under the DDL locks from the checkpointed one (checkpoint records each
// next one) and deletes the state document at the end. An error other than the term's end
// while the phase is still refusable (before anything was changed: MongoDB's
// non-recoverable errors before the destructive phases) ends the operation too, so that a
// retry starts afresh.
func (c *coordinator) run(ctx context.Context, op string, phases []primaryonly.Phase, checkpoint func(context.Context, string) error, refusable ...string) error {
	unlock, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := primaryonly.RunPhases(ctx, c.phase, phases, checkpoint); err != nil {
		if ctx.Err() == nil && slices.Contains(refusable, c.phase) {
			_ = c.s.removeDocument(context.WithoutCancel(ctx), c.id)
		}
		return err
	}
	if err := c.s.removeDocument(ctx, c.id); err != nil {
		return err
	}
	c.s.cfg.Log.Info("DDL coordinator done", "operation", op, "namespace", c.ns)
	return nil
}
