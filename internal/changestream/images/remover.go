package images

import (
	"context"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// DefaultRemoverInterval is how often the remover runs (MongoDB's
// expiredChangeStreamPreImageRemovalJobSleepSecs default, 10 seconds).
const DefaultRemoverInterval = 10 * time.Second

// removeBatch bounds the pre-images deleted in one storage unit.
const removeBatch = 256

// Remover deletes expired pre-images from a node's config.system.preimages (MongoDB's
// ChangeStreamExpiredPreImagesRemover). One runs per data node, replica-set members only (a
// standalone records none); each member expires its own copy, without logging. Its writes go
// through the node's operation layer (the global, database and collection intent locks), so
// a rollback's global X lock keeps it out while the node recovers.
type Remover struct {
	DB *operation.DB
	// ExpireAfterSeconds returns the changeStreamOptions cluster parameter's
	// preAndPostImages.expireAfterSeconds, and false when it is "off" (or unset).
	ExpireAfterSeconds func(ctx context.Context) (int64, bool, error)
	// Now is the wall clock (default time.Now), compared with the operationTime of
	// pre-images when ExpireAfterSeconds is set.
	Now func() time.Time
	// Interval is the pause between passes (default DefaultRemoverInterval).
	Interval time.Duration
	Log      *slog.Logger
}

// Run removes expired pre-images every Interval until ctx ends.
func (r *Remover) Run(ctx context.Context) {
	iv := r.Interval
	if iv <= 0 {
		iv = DefaultRemoverInterval
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := r.RemoveExpired(ctx); err != nil && ctx.Err() == nil {
			r.logger().Warn("change stream pre-images removal failed", "error", err)
		} else if n > 0 {
			r.logger().Debug("removed expired change stream pre-images", "count", n)
		}
	}
}

func (r *Remover) logger() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

// expiry says which pre-images a pass removes (MongoDB's PreImageAttributes::isExpiredPreImage,
// plus those of collections that are gone).
type expiry struct {
	// oldestOplog is the timestamp of the oldest oplog entry: a pre-image below it has lost
	// its entry, so no stream can ask for it.
	oldestOplog optime.Timestamp
	// expireAt, when hasExpire, is the newest operationTime (ms) that has expired.
	expireAt  int64
	hasExpire bool
	snap      *catalog.Snapshot
}

func (x *expiry) expired(doc bsoncore.Document) bool {
	id, ok := doc.Lookup("_id").DocumentOK()
	if !ok {
		return false
	}
	s, i, ok := id.Lookup("ts").TimestampOK()
	if !ok {
		return false
	}
	if optime.MakeTimestamp(s, i) < x.oldestOplog {
		return true
	}
	if x.hasExpire {
		if ms, ok := doc.Lookup("operationTime").DateTimeOK(); ok && ms <= x.expireAt {
			return true
		}
	}
	if st, b, ok := id.Lookup("nsUUID").BinaryOK(); ok && st == 4 && len(b) == 16 {
		var u catalog.UUID
		copy(u[:], b)
		if _, exists := x.snap.ByUUID(u); !exists {
			return true // the collection was dropped
		}
	}
	return false
}

// RemoveExpired runs one pass and returns how many pre-images it deleted. It deletes in
// units of at most removeBatch pre-images, scanning again after each full one.
func (r *Remover) RemoveExpired(ctx context.Context) (int, error) {
	snap := r.DB.Catalog.Latest()
	if _, ok := snap.ByNS(NS); !ok {
		return 0, nil
	}
	x := expiry{snap: snap}
	if r.ExpireAfterSeconds != nil {
		secs, on, err := r.ExpireAfterSeconds(ctx)
		if err != nil {
			return 0, err
		}
		if on {
			now := time.Now
			if r.Now != nil {
				now = r.Now
			}
			x.expireAt, x.hasExpire = now().Add(-time.Duration(secs)*time.Second).UnixMilli(), true
		}
	}
	op := r.DB.NewOp(ctx)
	defer op.Close()
	var err error
	if x.oldestOplog, err = oldestOplogEntry(op.RU, snap); err != nil {
		return 0, err
	}
	removed := 0
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		n := 0
		err := op.WriteCollection(ctx, NS, false, func(coll *index.Collection) error {
			n = 0
			if coll == nil {
				return nil
			}
			victims, err := scan(ctx, op.RU, coll, &x)
			if err != nil {
				return err
			}
			for _, v := range victims {
				if err := coll.DeleteDocument(op.RU, v.rid, v.doc); err != nil {
					return err
				}
			}
			n = len(victims)
			return nil
		})
		if err != nil {
			return removed, err
		}
		removed += n
		if n < removeBatch {
			return removed, nil
		}
	}
}

type victim struct {
	rid recordid.ID
	doc bsoncore.Document
}

// scan returns up to removeBatch expired pre-images, checking for interruption as it goes.
func scan(ctx context.Context, ru *storage.RecoveryUnit, coll *index.Collection, x *expiry) ([]victim, error) {
	cur, err := coll.RecordStore().NewCursor(ru, false)
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	var out []victim
	for n := 0; len(out) < removeBatch; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		rid, doc, ok := cur.Next()
		if !ok {
			break
		}
		if x.expired(doc) {
			out = append(out, victim{rid, append(bsoncore.Document(nil), doc...)})
		}
	}
	return out, cur.Err()
}

// oldestOplogEntry is the timestamp of the oplog's first entry (0 when the node has no oplog
// or an empty one: nothing is older).
func oldestOplogEntry(ru *storage.RecoveryUnit, snap *catalog.Snapshot) (optime.Timestamp, error) {
	defer ru.AbandonSnapshot()
	meta, ok := snap.ByNS(oplog.NS)
	if !ok {
		return 0, nil
	}
	c, err := ru.NewCursor(meta.Ident, storage.CursorOptions{})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if !c.First() {
		return 0, c.Err()
	}
	rid, err := recordid.FromKey(c.Key())
	if err != nil || !rid.IsLong() {
		return 0, mongoerr.Newf(mongoerr.InternalError, "oplog record key is not a timestamp: %v", err)
	}
	return optime.Timestamp(rid.Int64()), nil
}
