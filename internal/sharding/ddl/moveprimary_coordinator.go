package ddl

// The movePrimary coordinator (MongoDB 7.0's MovePrimaryCoordinator, spec: sharding.md
// "Sharding DDL Coordinator"): the database's primary shard (the donor) moves the database's
// unsharded collections and views to another shard and makes it the primary, under the
// database's DDL lock, resumably. Phases, each checkpointed (majority) before it runs:
//
//   - checkPreconditions: the recipient exists and is not draining, this shard is still the
//     primary (one already moved: success, nothing done), versioned writes to the database
//     wait (the database critical section), and the recipient has none of the collections
//     to move; the expected database version is recorded with the next checkpoint;
//   - cloneCatalogData: the recipient drops what an earlier attempt cloned and clones the
//     database (_shardsvrCloneCatalogData); the moved names are recorded;
//   - commit: reads wait too; the config server makes the recipient the primary, matched on
//     the expected version (_configsvrCommitMovePrimary, which answers ok whether it matched
//     or not: the entry read back tells). A resumed commit that finds the database moved
//     did it before;
//   - dropStaleData: the donor drops its copies, which no one routes to any more;
//   - exitCriticalSection: the donor forgets the database's version and releases the waiting
//     requests (StaleDbVersion: routers refresh and go to the new primary).
//
// The critical section lives in the donor's memory (MongoDB persists it): a restarted donor
// may have taken writes before its resumed coordinator blocks them again, so a commit
// resumed after a restart clones again, under the section, before it commits. An error
// before the commit (a refusal, a failed clone, a commit that matched nothing) drops what
// the recipient cloned and ends the operation, the database where it was.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/primaryonly"
	"humongo/internal/sharding/routing"
	"humongo/internal/vclock"
)

const opMovePrimary = "movePrimary"

// MovePrimary moves database db's primary from this shard to shard to through the movePrimary
// coordinator (a request with the same recipient joins a running one) and waits for its end.
// A database already on to is a success with nothing done.
func (s *CoordinatorService) MovePrimary(ctx context.Context, db, to string) error {
	remote, err := s.cfg.Remote()
	if err != nil {
		return err
	}
	toShard, err := recipientShard(ctx, remote, to)
	if err != nil {
		return err
	}
	self := s.cfg.Self()
	if toShard == self {
		return nil
	}
	entry, err := remote.Catalog.Database(ctx, db)
	if err != nil {
		return err
	}
	if entry.Primary == toShard {
		return nil // a retry of a move that committed
	}
	if entry.Primary != self {
		return notPrimaryShard(db, self, entry.Primary, entry.Version)
	}
	h, err := s.svc.GetOrCreate(ctx, bsoncore.NewDocumentBuilder().
		AppendDocument("_id", coordinatorDocID(db, opMovePrimary)).AppendString("toShard", toShard).Build())
	if err != nil {
		return err
	}
	return h.Wait(ctx)
}

// recipientShard is to's shard id, from a fresh shard registry.
func recipientShard(ctx context.Context, remote *Remote, to string) (string, error) {
	if err := remote.Shards.Reload(ctx); err != nil {
		return "", err
	}
	sh, err := remote.Shards.Lookup(ctx, to)
	if err != nil {
		return "", withContext(err, "Requested primary shard %s does not exist", to)
	}
	return sh.ID, nil
}

func notPrimaryShard(db, self, primary string, v routing.DatabaseVersion) error {
	return mongoerr.Newf(mongoerr.StaleDbVersion, "movePrimary of database %s reached shard %s, which is not its primary shard (%s is)",
		db, self, primary).WithInfo(staleDbInfo(db, v))
}

type movePrimary struct {
	coordinator
	to string
	// What the phases found, recorded at each checkpoint: nothing to do (the database was on
	// the recipient), the database version the commit expects, what the recipient cloned
	// (unsharded collections) and every name that moved (those and the views).
	noop     bool
	expected routing.DatabaseVersion
	colls    []string
	moved    []string
	// In memory: this instance holds the critical section, and has held it since its clone
	// (the recipient's copies are current).
	inSection, fresh bool
}

func newMovePrimary(s *CoordinatorService, doc bsoncore.Document) (*movePrimary, error) {
	doc = append(bsoncore.Document(nil), doc...)
	id, _ := doc.Lookup("_id").DocumentOK()
	db, _ := id.Lookup("namespace").StringValueOK()
	m := &movePrimary{coordinator: newCoordinator(s, doc, []string{db}, nil)}
	m.to, _ = doc.Lookup("toShard").StringValueOK()
	m.noop, _ = doc.Lookup("noop").BooleanOK()
	if v, err := doc.LookupErr("expectedDatabaseVersion"); err == nil {
		ev, err := routing.ParseDatabaseVersion(v)
		if err != nil {
			return nil, fmt.Errorf("movePrimary coordinator of %s: %w", db, err)
		}
		m.expected = ev
	}
	m.colls = stringArray(doc, "clonedCollections")
	m.moved = stringArray(doc, "movedNames")
	return m, nil
}

func stringArray(doc bsoncore.Document, field string) []string {
	arr, _ := doc.Lookup(field).ArrayOK()
	vals, _ := arr.Values()
	var out []string
	for _, v := range vals {
		if s, ok := v.StringValueOK(); ok {
			out = append(out, s)
		}
	}
	return out
}

func appendStrings(b *bsoncore.DocumentBuilder, field string, ss []string) {
	ab := bsoncore.NewArrayBuilder()
	for _, s := range ss {
		ab.AppendString(s)
	}
	b.AppendArray(field, ab.Build())
}

// CheckJoin: a movePrimary of the database to the same shard joins.
func (m *movePrimary) CheckJoin(doc bsoncore.Document) error {
	if to, _ := doc.Lookup("toShard").StringValueOK(); to != m.to {
		return mongoerr.New(mongoerr.ConflictingOperationInProgress,
			"Another movePrimary operation with different arguments is already running ont the same database")
	}
	return nil
}

func (m *movePrimary) Run(ctx context.Context) error {
	defer m.exitSection()
	return m.run(ctx, opMovePrimary, []primaryonly.Phase{
		{Name: "checkPreconditions", Run: m.checkPreconditions},
		{Name: "cloneCatalogData", Run: m.cloneCatalogData},
		{Name: "commit", Run: m.s.retryingRetriable(m.ns, opMovePrimary, m.commit)},
		{Name: "dropStaleData", Run: m.s.retryingAll(m.ns, opMovePrimary, m.dropStaleData)},
		{Name: "exitCriticalSection", Run: func(context.Context) error { m.exitSection(); return nil }},
	}, m.checkpoint, "checkPreconditions", "cloneCatalogData", "commit")
}

func (m *movePrimary) checkpoint(ctx context.Context, phase string) error {
	if phase == "checkPreconditions" {
		return m.checkpointPhase(ctx, phase, nil)
	}
	return m.checkpointPhase(ctx, phase, func(set *bsoncore.DocumentBuilder) {
		set.AppendBoolean("noop", m.noop)
		if !m.noop {
			set.AppendDocument("expectedDatabaseVersion", m.expected.Doc())
		}
		appendStrings(set, "clonedCollections", m.colls)
		appendStrings(set, "movedNames", m.moved)
	})
}

func (m *movePrimary) sections() (DatabaseCriticalSection, error) {
	if m.s.cfg.Shard == nil || m.s.cfg.Shard.DatabaseSections == nil {
		return nil, mongoerr.New(mongoerr.ShardingStateNotInitialized, "this node has no database critical sections")
	}
	return m.s.cfg.Shard.DatabaseSections()
}

// enterSection blocks versioned writes to the database (this instance's section: the same
// reason enters again).
func (m *movePrimary) enterSection() error {
	cs, err := m.sections()
	if err != nil {
		return err
	}
	reason := fmt.Sprintf(`{ command: "movePrimary", db: "%s", to: "%s" }`, m.ns, m.to)
	if err := cs.EnterDatabaseCriticalSection(m.ns, reason); err != nil {
		return err
	}
	m.inSection = true
	return nil
}

// exitSection forgets the database's version here and releases the section, if held.
func (m *movePrimary) exitSection() {
	if !m.inSection {
		return
	}
	if cs, err := m.sections(); err == nil {
		cs.ExitDatabaseCriticalSection(m.ns)
	}
	m.inSection, m.fresh = false, false
}

// checkPreconditions is MovePrimaryCoordinator's kUnset checks, with its errors, and the
// section entered.
func (m *movePrimary) checkPreconditions(ctx context.Context) error {
	remote, err := m.s.cfg.Remote()
	if err != nil {
		return err
	}
	to, err := recipientShard(ctx, remote, m.to)
	if err != nil {
		return err
	}
	self := m.s.cfg.Self()
	if to == self {
		m.noop = true
		return nil
	}
	toShard, err := remote.Shards.Lookup(ctx, to)
	if err != nil {
		return err
	}
	if toShard.Draining {
		return mongoerr.Newf(mongoerr.ShardNotFound, "Requested primary shard %s is draining", to)
	}
	entry, err := remote.Catalog.Database(ctx, m.ns)
	if err != nil {
		return err
	}
	if entry.Primary == to {
		m.noop = true
		return nil
	}
	if entry.Primary != self {
		return notPrimaryShard(m.ns, self, entry.Primary, entry.Version)
	}
	m.expected = entry.Version
	if err := m.enterSection(); err != nil {
		return err
	}
	colls, views, err := m.toMove(ctx, remote)
	if err != nil {
		return err
	}
	recipient, err := remote.Shard(ctx, to)
	if err != nil {
		return err
	}
	onRecipient, err := collectionNames(ctx, recipient, m.ns)
	if err != nil {
		return err
	}
	for _, name := range append(colls, views...) {
		if slices.Contains(onRecipient, name) {
			return mongoerr.Newf(mongoerr.NamespaceExists, "Found orphaned collection %s.%s on recipient %s", m.ns, name, to)
		}
	}
	return nil
}

// toMove lists the donor's unsharded collections and its views (sorted).
func (m *movePrimary) toMove(ctx context.Context, remote *Remote) (colls, views []string, err error) {
	colls, err = unshardedCollections(ctx, remote, func(ctx context.Context, cmd bsoncore.Document) ([]bsoncore.Document, error) {
		return cursorAll(ctx, m.s.cfg.Local, m.ns, "$cmd.listCollections", cmd)
	}, m.ns)
	if err != nil {
		return nil, nil, err
	}
	infos, err := cursorAll(ctx, m.s.cfg.Local, m.ns, "$cmd.listCollections", listViewsCmd())
	if err != nil {
		return nil, nil, err
	}
	return colls, viewNames(infos), nil
}

func (m *movePrimary) cloneCatalogData(ctx context.Context) error {
	if m.noop {
		return nil
	}
	return m.cloneOrAbort(ctx)
}

// cloneOrAbort clones; after a failure other than the term's end it drops what the
// recipient cloned (the operation ends, the database stays here).
func (m *movePrimary) cloneOrAbort(ctx context.Context) error {
	err := m.clone(ctx)
	if err != nil && ctx.Err() == nil {
		m.dropRecipientCopies(ctx)
	}
	return err
}

// clone has the recipient clone the database under the section: what an earlier attempt
// cloned is dropped first (the donor may have taken writes since: its section was lost),
// then _shardsvrCloneCatalogData copies what the donor holds now.
func (m *movePrimary) clone(ctx context.Context) error {
	if err := m.enterSection(); err != nil {
		return err
	}
	remote, err := m.s.cfg.Remote()
	if err != nil {
		return err
	}
	colls, views, err := m.toMove(ctx, remote)
	if err != nil {
		return err
	}
	m.moved = slices.Concat(m.moved, colls, views)
	slices.Sort(m.moved)
	m.moved = slices.Compact(m.moved)
	if err := m.dropOnRecipient(ctx, m.moved); err != nil {
		return err
	}
	recipient, err := remote.Shard(ctx, m.to)
	if err != nil {
		return err
	}
	donor, err := remote.Shards.Lookup(ctx, m.s.cfg.Self())
	if err != nil {
		return err
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("_shardsvrCloneCatalogData", m.ns).AppendString("from", donor.Host).
		AppendDocument("writeConcern", majority()).Build()
	reply, err := Run(ctx, recipient, "admin", cmd)
	if err != nil {
		return withContext(err, "movePrimary operation on database %s failed to clone data to recipient %s", m.ns, m.to)
	}
	var cloned []string
	for _, ns := range stringArray(reply, "clonedColls") {
		cloned = append(cloned, strings.TrimPrefix(ns, m.ns+"."))
	}
	slices.Sort(cloned)
	if !slices.Equal(cloned, colls) {
		return mongoerr.New(mongoerr.Location7118501,
			"Error cloning data in movePrimary: the list of actually cloned collections doesn't match the list of collections to close")
	}
	m.colls = colls
	m.moved = slices.Concat(colls, views)
	slices.Sort(m.moved)
	m.fresh = true
	return nil
}

// dropOnRecipient drops names of the database on the recipient (those missing are fine).
func (m *movePrimary) dropOnRecipient(ctx context.Context, names []string) error {
	remote, err := m.s.cfg.Remote()
	if err != nil {
		return err
	}
	recipient, err := remote.Shard(ctx, m.to)
	if err != nil {
		return err
	}
	for _, name := range names {
		cmd := bsoncore.NewDocumentBuilder().AppendString("drop", name).AppendDocument("writeConcern", majority()).Build()
		if _, err := Run(ctx, recipient, m.ns, cmd); err != nil && !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
			return fmt.Errorf("drop %s.%s on recipient %s: %w", m.ns, name, m.to, err)
		}
	}
	return nil
}

// dropRecipientCopies is dropOrphanedDataOnRecipient after an abort (best effort: an orphan
// on the recipient is refused by the next movePrimary's preconditions, not lost).
func (m *movePrimary) dropRecipientCopies(ctx context.Context) {
	if err := m.dropOnRecipient(context.WithoutCancel(ctx), m.moved); err != nil {
		m.s.cfg.Log.Warn("Failed to drop the collections cloned by a failed movePrimary", "db", m.ns,
			"shardId", m.to, "error", err.Error())
	}
}

// commit makes the recipient the primary on the config server. The entry read first tells
// a resumed commit whether it happened; one not made yet, with the section lost since the
// clone, clones again first.
func (m *movePrimary) commit(ctx context.Context) error {
	if m.noop {
		return nil
	}
	if err := fpMovePrimaryHangBeforeCommit.PauseWhileSet(ctx); err != nil {
		return err
	}
	remote, err := m.s.cfg.Remote()
	if err != nil {
		return err
	}
	if moved, err := m.committed(ctx, remote); err != nil || moved {
		return err
	}
	if !m.fresh {
		before := slices.Clone(m.moved)
		if err := m.cloneOrAbort(ctx); err != nil {
			return err
		}
		if !slices.Equal(before, m.moved) { // what dropStaleData drops, were the donor to stop
			if err := m.checkpoint(ctx, "commit"); err != nil {
				return err
			}
		}
	}
	cs, err := m.sections()
	if err != nil {
		return err
	}
	cs.PromoteDatabaseCriticalSection(m.ns)
	cmd := bsoncore.NewDocumentBuilder().AppendString("_configsvrCommitMovePrimary", m.ns).
		AppendDocument("expectedDatabaseVersion", m.expected.Doc()).AppendString("to", m.to).
		AppendDocument("writeConcern", majority()).Build()
	reply, cerr := Run(ctx, remote.Config(), "admin", cmd)
	if cerr != nil && transient(cerr) {
		return cerr // retried: the entry read then tells whether it happened
	}
	if cerr == nil {
		// The commit is majority committed at its operationTime: the read below waits for
		// it (the catalog client reads at the clock's ConfigTime).
		if t, i, ok := reply.Lookup("operationTime").TimestampOK(); ok && remote.opts.Clock != nil {
			_ = remote.opts.Clock.Advance(vclock.Time{Config: optime.MakeTimestamp(t, i)})
		}
	}
	moved, err := m.committed(ctx, remote)
	if err != nil || moved {
		return err
	}
	m.dropRecipientCopies(ctx)
	if cerr != nil {
		return withContext(cerr, "movePrimary operation on database %s failed to commit metadata changes", m.ns)
	}
	return mongoerr.New(mongoerr.Location7120209, "Error committing movePrimary: update of config.databases failed")
}

// committed reads the database's entry: moved to the recipient (true), still here at the
// expected version (false), or changed otherwise (7120209: the operation ends, after the
// recipient's copies are dropped).
func (m *movePrimary) committed(ctx context.Context, remote *Remote) (bool, error) {
	entry, err := remote.Catalog.Database(ctx, m.ns)
	if err != nil {
		return false, err
	}
	switch {
	case entry.Primary == m.to:
		return true, nil
	case entry.Primary == m.s.cfg.Self() && entry.Version == m.expected:
		return false, nil
	}
	m.dropRecipientCopies(ctx)
	return false, mongoerr.New(mongoerr.Location7120209, "Error committing movePrimary: update of config.databases failed")
}

// dropStaleData is dropStaleDataOnDonor: the donor's copies are no one's now. The section is
// entered again after a restart, so that versioned requests wait until the database's
// version is forgotten here.
func (m *movePrimary) dropStaleData(ctx context.Context) error {
	if m.noop {
		return nil
	}
	if err := fpMovePrimaryHangBeforeDrop.PauseWhileSet(ctx); err != nil {
		return err
	}
	if err := m.enterSection(); err != nil {
		return err
	}
	for _, name := range m.moved {
		cmd := bsoncore.NewDocumentBuilder().AppendString("drop", name).Build()
		if _, err := m.s.cfg.Local(ctx, m.ns, cmd); err != nil && !mongoerr.Is(err, mongoerr.NamespaceNotFound) {
			return fmt.Errorf("drop stale collection %s.%s on the donor: %w", m.ns, name, err)
		}
	}
	return nil
}
