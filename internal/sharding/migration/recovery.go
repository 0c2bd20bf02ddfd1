package migration

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/primaryonly"
)

// Node is what the step-up recovery needs of the replication coordinator (the shape of
// configsvr.Node): topology changes, writable-primary state and the term.
type Node = primaryonly.Node

// RecoverCoordinators resumes every unfinished migration coordinator of this donor
// (config.migrationCoordinators), MongoDB's resumeMigrationCoordinationsOnStepUp: each is
// decided from config.chunks if undecided, its sequence run and its document deleted. A
// critical section this process still holds for one (a commit whose outcome was unknown) is
// released once its metadata is refreshed.
func (s *Service) RecoverCoordinators(ctx context.Context) error {
	reply, err := s.LocalRun(ctx, "config", bsoncore.NewDocumentBuilder().AppendString("find", "migrationCoordinators").Build())
	if err != nil {
		return fmt.Errorf("read config.migrationCoordinators: %w", err)
	}
	arr, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := arr.Values()
	for _, v := range vals {
		raw, _ := v.DocumentOK()
		doc, err := ParseCoordinatorDoc(append(bsoncore.Document(nil), raw...))
		if err != nil {
			return err
		}
		c := &Coordinator{Doc: doc, Steps: nodeSteps{s}}
		if err := c.Recover(ctx); err != nil {
			return fmt.Errorf("recover migration %s of %s: %w", doc.ID, doc.NS, err)
		}
		s.Filtering.ExitCriticalSection(doc.NS)
		s.Log.Info("Recovered a migration coordinator", "migrationId", doc.ID.String(), "ns", doc.NS, "decision", string(c.Doc.Decision))
	}
	return nil
}

// BeforeWritable runs when this node ends a drain, before it takes writes in its new term:
// it forgets the filtering metadata of its earlier stints (filtering.Runtime.OnStepUp), and
// each namespace with an unfinished coordinator enters the critical section until
// RecoverCoordinators has decided it and refreshed (MongoDB clears those namespaces'
// metadata at step-up and makes their refreshes wait for the recovery). Otherwise a write
// could be judged by metadata refreshed while the dead donor's commit is still on its way,
// land on the donor, and be lost when the commit moves the range.
func (s *Service) BeforeWritable() {
	s.Filtering.OnStepUp()
	nss, err := s.Local.CoordinatorNamespaces(context.Background())
	if err != nil {
		s.Log.Error("Failed to read config.migrationCoordinators at step-up", "error", err.Error())
		return
	}
	for _, ns := range nss {
		// Already held (a commit of this process whose outcome was unknown): still held.
		_ = s.Filtering.EnterCriticalSection(ns, "{ reason: \"migration recovery at step-up\" }")
	}
}

// StartRecovery runs RecoverCoordinators once per term in which this node is a writable
// primary, retrying while it fails and the node is still primary; stop ends it and waits.
func (s *Service) StartRecovery(node Node) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		primaryonly.FollowTerms(ctx, node, time.Second, s.Log, "MigrationCoordinatorRecovery", primaryonly.TermHooks{
			StepUp: func(ctx context.Context, _ int64) error {
				unlock, ok := s.Registry.Lock()
				if !ok {
					return nil // shutting down
				}
				defer unlock()
				if err := s.recoverMinOpTime(ctx); err != nil {
					return err
				}
				return s.RecoverCoordinators(ctx)
			},
		})
	}()
	return func() {
		cancel()
		<-done
	}
}

// minOpTimeRecoveryID is ShardingStateRecovery's document in admin.system.version:
// {_id: "minOpTimeRecovery", configsvrConnectionString, shardName, minOpTime,
// minOpTimeUpdaters}. A donor increments minOpTimeUpdaters before its critical section and
// decrements it after; a node that finds it above zero at step-up did not finish a metadata
// change and must not trust metadata older than minOpTime (it advances its config time
// there and forgets its filtering metadata).
const minOpTimeRecoveryID = "minOpTimeRecovery"

func (s *Service) minOpTimeUpdate(ctx context.Context, inc int32) error {
	if s.ConfigTime == nil {
		return nil
	}
	ts := s.ConfigTime()
	set := bsoncore.NewDocumentBuilder().AppendString("shardName", s.Self()).
		AppendDocument("minOpTime", bsoncore.NewDocumentBuilder().AppendTimestamp("ts", ts.T, ts.I).AppendInt64("t", -1).Build())
	if s.ConfigConnString != nil {
		set.AppendString("configsvrConnectionString", s.ConfigConnString())
	}
	u := bsoncore.NewDocumentBuilder().AppendDocument("$set", set.Build()).
		AppendDocument("$inc", bsoncore.NewDocumentBuilder().AppendInt32("minOpTimeUpdaters", inc).Build()).Build()
	cmd := bsoncore.NewDocumentBuilder().AppendString("update", "system.version").AppendArray("updates", bsoncore.NewArrayBuilder().
		AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("q", bsoncore.NewDocumentBuilder().AppendString("_id", minOpTimeRecoveryID).Build()).
			AppendDocument("u", u).AppendBoolean("upsert", true).Build()).Build()).Build()
	if _, err := writeOK(s.LocalRun(ctx, "admin", cmd)); err != nil {
		return fmt.Errorf("update %s: %w", minOpTimeRecoveryID, err)
	}
	return s.WaitMajority(ctx)
}

// recoverMinOpTime is ShardingStateRecovery::recover at step-up.
func (s *Service) recoverMinOpTime(ctx context.Context) error {
	cmd := bsoncore.NewDocumentBuilder().AppendString("find", "system.version").
		AppendDocument("filter", bsoncore.NewDocumentBuilder().AppendString("_id", minOpTimeRecoveryID).Build()).Build()
	reply, err := s.LocalRun(ctx, "admin", cmd)
	if err != nil {
		return err
	}
	arr, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return nil
	}
	doc, _ := vals[0].DocumentOK()
	n, _ := doc.Lookup("minOpTimeUpdaters").AsInt64OK()
	if n <= 0 {
		return nil
	}
	if t, i, ok := doc.Lookup("minOpTime", "ts").TimestampOK(); ok && s.AdvanceConfigTime != nil {
		s.AdvanceConfigTime(t, i)
	}
	if ns := s.Registry.ActiveDonateNS(); ns == "" {
		s.Filtering.ClearAll()
	}
	reset := bsoncore.NewDocumentBuilder().AppendString("update", "system.version").AppendArray("updates", bsoncore.NewArrayBuilder().
		AppendDocument(bsoncore.NewDocumentBuilder().AppendDocument("q", bsoncore.NewDocumentBuilder().AppendString("_id", minOpTimeRecoveryID).Build()).
			AppendDocument("u", bsoncore.NewDocumentBuilder().AppendDocument("$set",
				bsoncore.NewDocumentBuilder().AppendInt32("minOpTimeUpdaters", 0).Build()).Build()).Build()).Build()).Build()
	_, err = writeOK(s.LocalRun(ctx, "admin", reset))
	return err
}

// recoverLater retries RecoverCoordinators in a goroutine of the service until it succeeds
// (once the running donation has unregistered, the registry can be locked for it).
func (s *Service) recoverLater() {
	_ = s.spawn(func(ctx context.Context) {
		for {
			if unlock, ok := s.Registry.Lock(); ok {
				err := s.RecoverCoordinators(ctx)
				unlock()
				if err == nil {
					return
				}
				s.Log.Warn("Failed to resolve an unfinished migration; retrying", "error", err.Error())
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
}
