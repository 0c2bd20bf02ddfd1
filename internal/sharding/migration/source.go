package migration

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/failpoint"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/routing"
)

// Fail points of the donor's steps (MongoDB's names): moveChunkHangAtStep5 holds the
// migration in its critical section before _recvChunkCommit; hangBeforePostMigrationCommitRefresh
// holds it after the config server's commit, before the refresh and the coordinator's
// sequence. Tests kill the donor there.
var (
	moveChunkHangAtStep5                 = failpoint.Register("moveChunkHangAtStep5")
	hangBeforePostMigrationCommitRefresh = failpoint.Register("hangBeforePostMigrationCommitRefresh")
)

// MoveRange is the donor's _shardsvrMoveRange: it registers the donation (joining an
// identical running one) and runs it in a goroutine of the service, so that a client giving
// up does not leave it halfway; the caller waits for its outcome with ctx. With
// WaitForDelete it then waits for the donor's range deletion (the range deleter's work).
func (s *Service) MoveRange(ctx context.Context, req MoveRangeRequest) error {
	scoped, err := s.Registry.RegisterDonate(ctx, req)
	if err != nil {
		return err
	}
	if scoped.ShouldExecute() {
		if err := s.spawn(func(sctx context.Context) {
			id, err := s.donate(sctx, req)
			scoped.a.id = id
			scoped.Complete(err)
		}); err != nil {
			scoped.Complete(err)
		}
	}
	if err := scoped.Wait(ctx); err != nil {
		return err
	}
	if req.WaitForDelete {
		return s.waitRangeDeletion(ctx, scoped.a.id)
	}
	return nil
}

// waitRangeDeletion waits until the donor's task id is gone from config.rangeDeletions
// (the range deleter removes it when the range is clean).
func (s *Service) waitRangeDeletion(ctx context.Context, id catalog.UUID) error {
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", "rangeDeletions").AppendDocument("filter", idFilter(id)).
		AppendInt32("limit", 1).AppendBoolean("singleBatch", true).Build()
	for {
		reply, err := s.LocalRun(ctx, "config", cmd)
		if err != nil {
			return err
		}
		arr, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
		if vals, _ := arr.Values(); len(vals) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return mongoerr.Newf(mongoerr.Interrupted, "waiting for the deletion of the migrated range: %v", context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// notOwned is the StaleConfig of a range this shard does not own (checkRangeOwnership).
func notOwned(ns, self string, min, max bsoncore.Document, wanted routing.ChunkVersion) error {
	return mongoerr.Newf(mongoerr.StaleConfig, "Range with bounds [%s, %s) is not owned by this shard.",
		bsonutil.FormatDoc(min), bsonutil.FormatDoc(max)).WithInfo(routing.StaleConfigInfo(ns, self, routing.Ignored(), &wanted))
}

// donate runs one migration as the donor (MigrationSourceManager + the moveChunk command's
// steps) and returns its migration id.
func (s *Service) donate(ctx context.Context, req MoveRangeRequest) (_ catalog.UUID, err error) {
	start := time.Now()
	s.Stats.DonorStarted.Add(1)
	defer func() { s.Stats.DonorMillis.Add(time.Since(start).Milliseconds()) }()
	self := s.Self()
	timing := s.newMoveTiming("from", req.NS, self, req.ToShard, req.Min, req.Max, 6)
	defer func() { timing.log(ctx, err) }()
	if req.FromShard != "" && req.FromShard != self {
		return catalog.UUID{}, mongoerr.Newf(mongoerr.IllegalOperation, "_shardsvrMoveRange for shard %s was sent to shard %s", req.FromShard, self)
	}
	if req.ToShard == self {
		return catalog.UUID{}, mongoerr.New(mongoerr.InvalidOptions, "Destination shard cannot be the same as source")
	}
	// Unfinished migrations of this donor (a crash, a commit whose outcome was unknown)
	// are resolved before a new one starts.
	if err := s.RecoverCoordinators(ctx); err != nil {
		return catalog.UUID{}, err
	}
	if _, err := s.Cluster.ShardHost(ctx, req.ToShard); err != nil {
		return catalog.UUID{}, err
	}
	donorHost, err := s.Cluster.ShardHost(ctx, self)
	if err != nil {
		return catalog.UUID{}, err
	}
	m, err := s.Filtering.RefreshCollection(ctx, req.NS)
	if err != nil {
		return catalog.UUID{}, err
	}
	if m == nil || !m.Sharded() {
		return catalog.UUID{}, mongoerr.Newf(mongoerr.NamespaceNotSharded, "Cannot move range of %s: the collection is not sharded", req.NS)
	}
	table := m.Table
	gen := table.Generation()
	if gen.Epoch != req.Epoch || (req.CollectionTimestamp != (bson.Timestamp{}) && gen.Timestamp != req.CollectionTimestamp) {
		return catalog.UUID{}, mongoerr.Newf(mongoerr.StaleEpoch,
			"cannot move chunk %s because collection may have been dropped. current epoch: %s, cmd epoch: %s",
			req.NS, gen.Epoch.Hex(), req.Epoch.Hex())
	}
	shardVersion := table.ShardVersion(self)
	if !table.Pattern().IsShardKey(req.Min) || (req.Max != nil && !table.Pattern().IsShardKey(req.Max)) {
		return catalog.UUID{}, mongoerr.Newf(mongoerr.InvalidOptions, "shard key bounds [%s, %s) are not valid for shard key pattern %s",
			bsonutil.FormatDoc(req.Min), fmtMaybe(req.Max), table.Pattern())
	}
	chunk, err := table.ChunkForKey(req.Min)
	if err != nil {
		return catalog.UUID{}, err
	}
	max := req.Max
	if max == nil && s.OtherBound != nil && req.MaxChunkSizeBytes > 0 {
		if max, err = s.OtherBound(ctx, req.NS, table.Pattern().Doc(), req.Min, chunk.Max, req.MaxChunkSizeBytes); err != nil {
			return catalog.UUID{}, err
		}
	}
	if max == nil {
		max = chunk.Max
	}
	if chunk.Shard != self || bsonutil.CompareDocuments(max, chunk.Max) > 0 {
		return catalog.UUID{}, notOwned(req.NS, self, req.Min, max, shardVersion)
	}
	rng := Range{Pattern: table.Pattern(), Min: req.Min, Max: max}
	uuid := table.UUID()
	migrationID := catalog.NewUUID()
	sessionID := fmt.Sprintf("%s_%s_%s", self, req.ToShard, bson.NewObjectID().Hex())
	cloner := NewCloner(sessionID, req.NS, uuid, rng)
	lsid, txn := NewSessionTxn()
	// The session history of the range (sessions.go): sessions written to from now on
	// are noted by the tracker, the others are listed by Init below.
	cloner.sessions = NewSessionSource(req.NS, rng, s.Local, lsid)
	defer cloner.sessions.Close()

	// Track the donor's writes before collecting the _ids: a write racing the scan is in
	// the mods if the scan missed it.
	s.Local.Tracker.Start(cloner)
	defer s.Local.Tracker.Stop(cloner)
	// A write whose observer call came before Start may commit after the scan's snapshot:
	// wait for those (they hold the collection's IX lock until their unit ends).
	if err := s.Local.DrainWrites(ctx, req.NS); err != nil {
		return catalog.UUID{}, err
	}
	ids, _, localUUID, collDocs, collBytes, err := s.Local.ScanRange(ctx, req.NS, rng)
	if err != nil {
		return catalog.UUID{}, err
	}
	if localUUID != uuid {
		return catalog.UUID{}, mongoerr.Newf(mongoerr.InvalidUUID, "collection %s has UUID %s on shard %s, not %s as the routing table says",
			req.NS, localUUID, self, uuid)
	}
	if req.ForceJumbo == DoNotForce && req.MaxChunkSizeBytes > 0 && collDocs > 0 {
		avg := collBytes / collDocs
		if avg == 0 {
			avg = 1
		}
		maxRecs := req.MaxChunkSizeBytes / avg * 130 / 100
		if int64(len(ids)) > maxRecs {
			return catalog.UUID{}, mongoerr.Newf(mongoerr.ChunkTooBig,
				"Cannot move chunk: the maximum number of documents for a chunk is %d, the maximum chunk size is %d, average document size is %d. Found %d documents in chunk  ns: %s %s -> %s",
				maxRecs, req.MaxChunkSizeBytes, avg, len(ids), req.NS, bsonutil.FormatDoc(req.Min), bsonutil.FormatDoc(max))
		}
	}
	cloner.setToClone(ids)
	if err := cloner.sessions.Init(ctx); err != nil {
		return catalog.UUID{}, err
	}

	timing.max = max
	timing.step() // 1: checked against the routing table, the range's documents listed
	coord := &Coordinator{Steps: nodeSteps{s}, Doc: CoordinatorDoc{ID: migrationID, LSID: lsid, TxnNumber: txn, NS: req.NS,
		CollectionUUID: uuid, Donor: self, Recipient: req.ToShard, Min: req.Min, Max: max, PreMigrationChunkVersion: chunk.Version},
		Orphans: int64(len(ids))}
	whenToClean := "delayed"
	if req.WaitForDelete {
		whenToClean = "now"
	}
	if err := coord.Start(ctx, table.Pattern().Doc(), whenToClean); err != nil {
		// The documents may be partly written: the abort sequence removes what is there.
		return migrationID, s.abort(ctx, coord, req, sessionID, err, false)
	}
	s.mu.Lock()
	s.cloner = cloner
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.cloner == cloner {
			s.cloner = nil
		}
		s.mu.Unlock()
	}()

	start0 := bsoncore.NewDocumentBuilder().AppendString("_recvChunkStart", req.NS).
		AppendBinary("migrationId", 4, migrationID[:]).
		AppendDocument("lsid", bsoncore.NewDocumentBuilder().AppendBinary("id", 4, lsid[:]).Build()).
		AppendInt64("txnNumber", txn).AppendString("sessionId", sessionID).
		AppendBinary("collectionUUID", 4, uuid[:]).
		AppendString("from", donorHost).AppendString("fromShardName", self).AppendString("toShardName", req.ToShard).
		AppendDocument("min", req.Min).AppendDocument("max", max).AppendDocument("shardKeyPattern", table.Pattern().Doc()).
		AppendInt64("maxChunkSizeBytes", req.MaxChunkSizeBytes).AppendBoolean("waitForDelete", req.WaitForDelete)
	if on, wc := req.Throttle(); on {
		start0.AppendBoolean("secondaryThrottle", true)
		if wc != nil {
			start0.AppendDocument("writeConcern", wc)
		}
	}
	b := start0.Build()
	if _, err := s.Cluster.RunOnShard(ctx, req.ToShard, "admin", b); err != nil {
		return migrationID, s.abort(ctx, coord, req, sessionID, fmt.Errorf("_recvChunkStart failed: %w", err), false)
	}
	timing.step() // 2: the recipient started
	if err := s.waitSteady(ctx, req, sessionID); err != nil {
		return migrationID, s.abort(ctx, coord, req, sessionID, err, false)
	}
	timing.step() // 3: cloned and caught up

	s.Stats.CloneMillis.Add(time.Since(start).Milliseconds())

	// The critical section: writes first, drained; the recipient's last catch-up; reads
	// too; the commit.
	reason := fmt.Sprintf("{ command: \"moveChunk\", fromShard: \"%s\", toShard: \"%s\" }", self, req.ToShard)
	if err := s.minOpTimeUpdate(ctx, 1); err != nil {
		return migrationID, s.abort(ctx, coord, req, sessionID, err, false)
	}
	defer func() {
		if err := s.minOpTimeUpdate(ctx, -1); err != nil {
			s.Log.Warn("Failed to record the end of the migration's metadata change", "error", err.Error())
		}
	}()
	if err := s.Filtering.EnterCriticalSection(req.NS, reason); err != nil {
		return migrationID, s.abort(ctx, coord, req, sessionID, err, false)
	}
	critStart := time.Now()
	if err := s.Local.DrainWrites(ctx, req.NS); err != nil {
		return migrationID, s.abort(ctx, coord, req, sessionID, err, true)
	}
	_ = moveChunkHangAtStep5.PauseWhileSet(ctx)
	// No write comes any more: the recipient's session history drains to the end.
	cloner.sessions.CommitStarted()
	commit := bsoncore.NewDocumentBuilder().AppendString("_recvChunkCommit", req.NS).AppendString("sessionId", sessionID).Build()
	if _, err := s.Cluster.RunOnShard(ctx, req.ToShard, "admin", commit); err != nil {
		return migrationID, s.abort(ctx, coord, req, sessionID, fmt.Errorf("_recvChunkCommit failed: %w", err), true)
	}
	s.Filtering.PromoteCriticalSectionToBlockReads(req.NS)
	timing.step() // 4: in the critical section, the recipient's last changes applied
	commitStart := time.Now()
	migrated := *chunk
	migrated.Min, migrated.Max = req.Min, max
	commitErr := s.commitOnConfig(ctx, req, self, migrated, table.Version())
	dec := Committed
	if commitErr != nil {
		// The commit's outcome is unknown until the config server says who owns the range,
		// once a commit still on its way there is fenced off (as Coordinator.Recover).
		err := coord.Steps.EnsureChunkVersionIsGreaterThan(ctx, req.NS, uuid, req.Min, max, chunk.Version)
		var owner string
		if err == nil {
			owner, err = s.ownerWithRetry(ctx, uuid, req.Min)
		}
		if err != nil {
			// Nothing known: leave the critical section held and the coordinator
			// undecided; a recovery in the background (or the step-up recovery, or the
			// next donation) resolves it.
			s.Log.Error("Migration commit outcome unknown", "ns", req.NS, "migrationId", migrationID.String(), "error", err.Error())
			s.recoverLater()
			return migrationID, fmt.Errorf("commit of the migration of %s: %w (outcome unknown: %v)", req.NS, commitErr, err)
		}
		if owner == self { // as Coordinator.Recover decides
			dec = Aborted
		}
	}
	if dec == Aborted {
		return migrationID, s.abort(ctx, coord, req, sessionID, commitErr, true)
	}
	timing.step() // 5: committed on the config server
	_ = hangBeforePostMigrationCommitRefresh.PauseWhileSet(ctx)
	if err := coord.Decide(ctx, Committed); err != nil {
		s.Log.Error("Failed to record the migration's commit decision", "error", err.Error())
	}
	if _, err := s.Filtering.RefreshCollection(ctx, req.NS); err != nil {
		s.Log.Warn("Refresh after the migration commit failed; the metadata is cleared", "ns", req.NS, "error", err.Error())
		s.Filtering.ClearCollection(req.NS)
	}
	s.Filtering.ExitCriticalSection(req.NS)
	crit := time.Since(critStart)
	s.Stats.CriticalSectionMillis.Add(crit.Milliseconds())
	s.Stats.CommitMillis.Add(time.Since(commitStart).Milliseconds())
	s.Stats.DonorCommitted.Add(1)
	if err := coord.Complete(ctx); err != nil {
		s.Log.Warn("Migration committed; its coordinator's commit sequence is left to the step-up recovery", "error", err.Error())
	}
	timing.step() // 6: refreshed, out of the critical section, the coordinator done
	docs, nbytes := cloner.Progress()
	s.Stats.DocsClonedOnDonor.Add(docs)
	s.Log.Info("Migration committed", "ns", req.NS, "min", bsonutil.FormatDoc(req.Min), "max", bsonutil.FormatDoc(max),
		"to", req.ToShard, "docs", docs, "bytes", nbytes, "durationMillis", time.Since(start).Milliseconds(),
		"criticalSectionMillis", crit.Milliseconds(), "sessionEntries", cloner.sessions.Sent())
	return migrationID, nil
}

func fmtMaybe(d bsoncore.Document) string {
	if d == nil {
		return "{}"
	}
	return bsonutil.FormatDoc(d)
}

// waitSteady polls _recvChunkStatus until the recipient is steady (or failed).
func (s *Service) waitSteady(ctx context.Context, req MoveRangeRequest, sessionID string) error {
	status := bsoncore.NewDocumentBuilder().AppendString("_recvChunkStatus", req.NS).AppendBoolean("waitForSteadyOrDone", true).
		AppendString("sessionId", sessionID).Build()
	for {
		reply, err := s.Cluster.RunOnShard(ctx, req.ToShard, "admin", status)
		if err != nil {
			return fmt.Errorf("_recvChunkStatus failed: %w", err)
		}
		state, _ := reply.Lookup("state").StringValueOK()
		switch state {
		case StateSteady:
			return nil
		case StateFail, StateAbort:
			msg, _ := reply.Lookup("errmsg").StringValueOK()
			return mongoerr.Newf(mongoerr.OperationFailed, "Data transfer error: %s", msg)
		}
		if sid, _ := reply.Lookup("sessionId").StringValueOK(); sid != sessionID {
			return mongoerr.Newf(mongoerr.OperationFailed, "Data transfer error: the recipient runs another migration session (%s)", sid)
		}
		select {
		case <-ctx.Done():
			return mongoerr.Newf(mongoerr.Interrupted, "migration interrupted: %v", context.Cause(ctx))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// commitOnConfig sends _configsvrCommitChunkMigration (majority).
func (s *Service) commitOnConfig(ctx context.Context, req MoveRangeRequest, self string, migrated routing.Chunk, collVersion routing.ChunkVersion) error {
	validAfter := s.ValidAfter(ctx)
	chunkDoc := bsoncore.NewDocumentBuilder().AppendDocument("min", migrated.Min).AppendDocument("max", migrated.Max).
		AppendTimestamp("lastmod", migrated.Version.Major, migrated.Version.Minor).Build()
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendStringElement(b, "_configsvrCommitChunkMigration", req.NS)
	b = bsoncore.AppendStringElement(b, "fromShard", self)
	b = bsoncore.AppendStringElement(b, "toShard", req.ToShard)
	b = bsoncore.AppendDocumentElement(b, "migratedChunk", chunkDoc)
	b = collVersion.AppendShardVersion(b, "fromShardCollectionVersion")
	b = bsoncore.AppendTimestampElement(b, "validAfter", validAfter.T, validAfter.I)
	b = bsoncore.AppendDocumentElement(b, "writeConcern", majorityWC)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	_, err := s.Cluster.RunOnConfig(ctx, "admin", b)
	return err
}

// ownerWithRetry reads the range's owner from the config server, retrying a few times.
func (s *Service) ownerWithRetry(ctx context.Context, uuid catalog.UUID, min bsoncore.Document) (string, error) {
	var err error
	for i := 0; i < 10; i++ {
		var owner string
		if owner, err = ChunkOwner(ctx, s.Cluster, uuid, min); err == nil {
			return owner, nil
		}
		select {
		case <-ctx.Done():
			return "", errors.Join(err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "", err
}

// abort ends a migration that did not commit: the recipient is told to abort, the critical
// section (if held) released, the decision recorded and the abort sequence run. It returns
// cause.
func (s *Service) abort(ctx context.Context, coord *Coordinator, req MoveRangeRequest, sessionID string, cause error, inCritical bool) error {
	abortCmd := bsoncore.NewDocumentBuilder().AppendString("_recvChunkAbort", req.NS).AppendString("sessionId", sessionID).Build()
	if _, err := s.Cluster.RunOnShard(ctx, req.ToShard, "admin", abortCmd); err != nil {
		s.Log.Info("_recvChunkAbort failed", "error", err.Error())
	}
	if inCritical {
		if _, err := s.Filtering.RefreshCollection(ctx, req.NS); err != nil {
			s.Filtering.ClearCollection(req.NS)
		}
		s.Filtering.ExitCriticalSection(req.NS)
	}
	if err := coord.Decide(ctx, Aborted); err != nil {
		s.Log.Warn("Failed to record the migration's abort decision", "error", err.Error())
		return cause
	}
	if err := coord.Complete(ctx); err != nil {
		s.Log.Warn("Migration aborted; its coordinator's abort sequence is left to the step-up recovery", "error", err.Error())
	}
	s.Stats.DonorAborted.Add(1)
	s.Log.Info("Migration aborted", "ns", req.NS, "to", req.ToShard, "error", fmt.Sprint(cause))
	return cause
}
