package initialsync

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Status is replSetGetStatus's initialSyncStatus document (MongoDB's field names).
func (s *Syncer) Status() bsoncore.Document {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.st
	b := bsoncore.NewDocumentBuilder().
		AppendInt32("failedInitialSyncAttempts", int32(p.failedAttempts)).
		AppendInt32("maxFailedInitialSyncAttempts", int32(s.cfg.MaxAttempts)).
		AppendDateTime("initialSyncStart", p.start.UnixMilli())
	end := time.Now()
	if !p.end.IsZero() {
		end = p.end
		b.AppendDateTime("initialSyncEnd", p.end.UnixMilli())
	}
	b.AppendInt64("totalInitialSyncElapsedMillis", end.Sub(p.start).Milliseconds())
	arr := bsoncore.NewArrayBuilder()
	for _, a := range p.attempts {
		arr.AppendDocument(bsoncore.NewDocumentBuilder().AppendInt64("durationMillis", a.dur.Milliseconds()).
			AppendString("status", a.status).AppendString("syncSource", a.source).Build())
	}
	b.AppendArray("initialSyncAttempts", arr.Build())
	b.AppendString("syncSource", p.source)
	b.AppendInt64("appliedOps", p.appliedOps)
	if !p.beginFetching.TS.IsNull() {
		b.AppendTimestamp("initialSyncOplogStart", p.beginFetching.TS.Secs(), p.beginFetching.TS.Inc())
	}
	if !p.stop.TS.IsNull() {
		b.AppendTimestamp("initialSyncOplogEnd", p.stop.TS.Secs(), p.stop.TS.Inc())
	}
	b.AppendDocument("databases", bsoncore.NewDocumentBuilder().
		AppendInt32("databasesToClone", int32(p.dbsTotal-p.dbsCloned)).
		AppendInt32("databasesCloned", int32(p.dbsCloned)).
		AppendInt64("collectionsCloned", p.collsCloned).
		AppendInt64("documentsCopied", p.docsCloned).Build())
	return b.Build()
}
