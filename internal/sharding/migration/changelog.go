package migration

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// changeLogSizeBytes is config.changelog's capped size (kChangeLogCollectionSizeMB, 200 MB).
const changeLogSizeBytes = 200 << 20

// moveTiming is MoveTimingHelper: the time of each step of one migration on one side, logged
// to the config server's config.changelog when the migration ends as "moveChunk.from"
// (donor) or "moveChunk.to" (recipient), with {"step i of n": ms, ..., min, max, from, to,
// note: "success" | "aborted", errmsg?}. sh.status() reads the donor's entries for its
// "Migration Results for the last 24 hours".
type moveTiming struct {
	s        *Service
	where    string // "from" or "to"
	ns       string
	min, max bsoncore.Document
	from, to string
	steps    []int64 // ms of each step done so far
	total    int
	last     time.Time
}

func (s *Service) newMoveTiming(where, ns, from, to string, min, max bsoncore.Document, total int) *moveTiming {
	return &moveTiming{s: s, where: where, ns: ns, from: from, to: to, min: min, max: max, total: total, last: time.Now()}
}

// step marks the end of the next step.
func (t *moveTiming) step() {
	now := time.Now()
	t.steps = append(t.steps, now.Sub(t.last).Milliseconds())
	t.last = now
}

// log writes the entry (best effort, as MongoDB's: a failure is only logged). A migration
// that did not run every step is "aborted", with err's message when there is one.
func (t *moveTiming) log(ctx context.Context, err error) {
	if t.s.Cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	details := bsoncore.NewDocumentBuilder()
	for i, ms := range t.steps {
		details.AppendInt64(fmt.Sprintf("step %d of %d", i+1, t.total), ms)
	}
	if t.min != nil {
		details.AppendDocument("min", t.min)
	}
	if t.max != nil {
		details.AppendDocument("max", t.max)
	}
	details.AppendString("to", t.to).AppendString("from", t.from)
	if err == nil && len(t.steps) == t.total {
		details.AppendString("note", "success")
	} else {
		details.AppendString("note", "aborted")
	}
	if err != nil {
		details.AppendString("errmsg", err.Error())
	}
	if lerr := t.s.logChange(ctx, "moveChunk."+t.where, t.ns, details.Build()); lerr != nil {
		t.s.Log.Warn("Failed to log the migration to config.changelog", "ns", t.ns, "error", lerr.Error())
	}
}

// logChange is ShardingLogging::logChange: an entry {_id, server, shard, clientAddr, time,
// what, ns, details} in the config server's capped config.changelog (majority).
func (s *Service) logChange(ctx context.Context, what, ns string, details bsoncore.Document) error {
	// Created once per process: a round trip per migration to hear NamespaceExists is waste.
	if !s.changelogReady.Load() {
		create := bsoncore.NewDocumentBuilder().AppendString("create", "changelog").AppendBoolean("capped", true).
			AppendInt64("size", changeLogSizeBytes).Build()
		if _, err := s.Cluster.RunOnConfig(ctx, "config", create); err != nil && !mongoerr.Is(err, mongoerr.NamespaceExists) {
			return err
		}
		s.changelogReady.Store(true)
	}
	now := time.Now()
	self := s.Self()
	doc := bsoncore.NewDocumentBuilder().
		AppendString("_id", fmt.Sprintf("%s-%s-%s", self, now.UTC().Format("2006-01-02T15:04:05.000Z07:00"), bson.NewObjectID().Hex())).
		AppendString("server", self).AppendString("shard", self).AppendString("clientAddr", "").
		AppendDateTime("time", now.UnixMilli()).AppendString("what", what).AppendString("ns", ns).
		AppendDocument("details", details).Build()
	_, err := writeOK(s.Cluster.RunOnConfig(ctx, "config", bsoncore.NewDocumentBuilder().AppendString("insert", "changelog").
		AppendArray("documents", bsoncore.NewArrayBuilder().AppendDocument(doc).Build()).
		AppendDocument("writeConcern", majorityWC).Build()))
	return err
}
