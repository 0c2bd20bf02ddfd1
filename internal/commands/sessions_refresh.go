package commands

// The logical session cache's persistence on humongod (spec: sharding.md "The logical
// session cache", "Periodic cleanup of the session catalog and transactions table"): the
// sessions collection config.system.sessions (MongoDB's SessionsCollectionStandalone/RS over
// local storage), the transactions table as the reaper sees it, the periodic refresh and
// reap (every logicalSessionRefreshMillis, unless disableLogicalSessionCacheRefresh), and the
// test commands refreshLogicalSessionCacheNow and reapLogicalSessionCacheNow that run one
// at once.
//
// Only a node that writes (a standalone, a writable primary) writes either collection; the
// primary's writes replicate. A secondary's refresh forgets its recently used sessions
// without persisting them (MongoDB forwards them to the primary) and still kills the cursors
// of ended and expired sessions.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/retryable"
)

const (
	sessionsNS       = "config.system.sessions"
	sessionsTTLIndex = "lsidTTLIndex"
	transactionsNS   = "config.transactions"
	// sessionsBatch is how many sessions one write unit upserts or removes (MongoDB's
	// sessionMaxBatchSize).
	sessionsBatch = 1000
)

// sessionsWritable reports whether this node writes the sessions collection now.
func sessionsWritable(st *service.State) bool { return st.DB != nil && ttlMayDelete(st) }

// refreshSessionCache runs one refresh of st's logical session cache.
func refreshSessionCache(ctx context.Context, st *service.State) error {
	if st.DB == nil || st.Sessions == nil {
		return mongoerr.New(mongoerr.CommandNotSupported, "this server has no storage engine")
	}
	return st.Sessions.Refresh(ctx, sessionsStore{st}, st, sessionsWritable(st))
}

// reapSessionCache runs one reap of config.transactions: entries last written more than
// transactionRecordMinimumLifetimeMinutes ago whose session is gone from the sessions
// collection and has no running operation.
func reapSessionCache(ctx context.Context, st *service.State) (int, error) {
	if st.DB == nil || st.Sessions == nil || !sessionsWritable(st) {
		return 0, nil
	}
	minutes := int64(30)
	if st.Params != nil {
		if _, ok := st.Params.Spec("transactionRecordMinimumLifetimeMinutes"); ok {
			minutes = st.Params.Int("transactionRecordMinimumLifetimeMinutes")
		}
	}
	busy := map[lsc.Key]bool{}
	for _, k := range st.ActiveOpSessions() {
		busy[k] = true
	}
	olderThan := st.Sessions.Now().Add(-time.Duration(minutes) * time.Minute)
	// A prepared transaction's record outlives its session: it is how the transaction
	// survives failover.
	held := oplog.PreparedOf(st.DB.Engine)
	return st.Sessions.Reap(ctx, sessionsStore{st}, txnTable{st}, olderThan, func(k lsc.Key) bool {
		return busy[k] || (held.Len() > 0 && held.Get(retryable.LsidDoc(k)) != nil)
	})
}

// StartSessionRefresher starts the logical session cache's periodic refresh and reap over
// st (every logicalSessionRefreshMillis, read at start) and returns the function that stops
// it and waits for its goroutine; cmd/humongod calls it after opening storage and calls stop
// before closing the DB. It does nothing for a server without storage or when
// disableLogicalSessionCacheRefresh is set.
func StartSessionRefresher(ctx context.Context, st *service.State) (stop func()) {
	if st == nil || st.DB == nil || st.Sessions == nil ||
		(st.Params != nil && st.Params.Bool("disableLogicalSessionCacheRefresh")) {
		return func() {}
	}
	interval := 5 * time.Minute
	if st.Params != nil {
		interval = time.Duration(st.Params.Int("logicalSessionRefreshMillis")) * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := refreshSessionCache(ctx, st); err != nil && ctx.Err() == nil {
				st.Logger.Info("Failed to refresh session cache, will try again at the next refresh interval",
					logv2.C(logv2.Control), logv2.ID(20710), "error", err.Error())
			}
			if _, err := reapSessionCache(ctx, st); err != nil && ctx.Err() == nil {
				st.Logger.Info("Failed to reap transaction table",
					logv2.C(logv2.Control), logv2.ID(20711), "error", err.Error())
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

func addSessionCacheTestCommands(r *service.Registry) {
	add(r, &service.Command{
		Name:      "refreshLogicalSessionCacheNow",
		Auth:      service.AuthAnyUser,
		Handler:   runRefreshLogicalSessionCacheNow,
		Help:      "force a refresh of the logical session cache",
		Secondary: service.SecondaryAlways,
		TestOnly:  true,
	})
	add(r, &service.Command{
		Name:      "reapLogicalSessionCacheNow",
		Auth:      service.AuthAnyUser,
		Handler:   runReapLogicalSessionCacheNow,
		Help:      "force a reap of the logical session cache",
		Secondary: service.SecondaryAlways,
		TestOnly:  true,
	})
}

func runRefreshLogicalSessionCacheNow(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	if err := refreshSessionCache(ctx, env.State); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runReapLogicalSessionCacheNow(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	if _, err := reapSessionCache(ctx, env.State); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// lsidDoc is a session's _id in config.system.sessions: {id: UUID, uid: BinData}.
func lsidDoc(k lsc.Key) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendBinary("id", 4, k.ID[:]).AppendBinary("uid", 0, k.UID[:]).Build()
}

func lsidValue(k lsc.Key) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: lsidDoc(k)}
}

// sessionsStore is config.system.sessions on st's storage (lsc.Store).
type sessionsStore struct{ st *service.State }

func (s sessionsStore) expireSecs() int64 { return int64(s.st.Sessions.Timeout() / time.Second) }

// Setup creates the collection and its TTL index {lastUse: 1} named lsidTTLIndex, or sets
// the index's expireAfterSeconds when it differs (MongoDB runs createIndexes, or collMod on
// IndexOptionsConflict).
func (s sessionsStore) Setup(ctx context.Context) error {
	db := s.st.DB
	secs := s.expireSecs()
	if m, ok := db.Catalog.Latest().ByNS(sessionsNS); ok {
		if ix, ok := m.Index(sessionsTTLIndex); ok {
			if ix.ExpireAfterSeconds != nil && *ix.ExpireAfterSeconds == secs {
				return nil
			}
			cmd := bsoncore.NewDocumentBuilder().
				AppendString("collMod", "system.sessions").
				AppendDocument("index", bsoncore.NewDocumentBuilder().
					AppendString("name", sessionsTTLIndex).
					AppendInt64("expireAfterSeconds", secs).Build()).
				AppendString("$db", "config").Build()
			_, err := runCollMod(ctx, s.env(), cmd)
			return err
		}
	} else {
		op := db.NewOp(ctx)
		err := op.DDL(ctx, sessionsNS, func() error {
			if _, ok := db.Catalog.Latest().ByNS(sessionsNS); ok {
				return nil
			}
			return ddlCreateCollection(op, sessionsNS, nil)
		})
		op.Close()
		if err != nil {
			return err
		}
	}
	// The collection exists: createIndexes builds the index (ready at once while it is empty,
	// replicated through the two-phase build on a member otherwise).
	cmd := bsoncore.NewDocumentBuilder().
		AppendString("createIndexes", "system.sessions").
		AppendArray("indexes", bsoncore.NewArrayBuilder().AppendDocument(bsoncore.NewDocumentBuilder().
			AppendDocument("key", bsoncore.NewDocumentBuilder().AppendInt32("lastUse", 1).Build()).
			AppendString("name", sessionsTTLIndex).
			AppendInt32("expireAfterSeconds", int32(secs)).Build()).Build()).
		AppendString("$db", "config").Build()
	_, err := runCreateIndexes(ctx, s.env(), cmd)
	return err
}

// env is the environment of an internal DDL command on the config database.
func (s sessionsStore) env() *service.Env {
	return &service.Env{DB: "config", State: s.st}
}

// Exists reports whether the collection exists with its TTL index (MongoDB's
// checkSessionsCollectionExists, without the timeout check).
func (s sessionsStore) Exists(context.Context) (bool, error) {
	m, ok := s.st.DB.Catalog.Latest().ByNS(sessionsNS)
	if !ok {
		return false, nil
	}
	_, ok = m.Index(sessionsTTLIndex)
	return ok, nil
}

// Refresh upserts {_id, lastUse: now, user?: {name}} for each record, in batches.
func (s sessionsStore) Refresh(ctx context.Context, recs []lsc.Record, now time.Time) error {
	for len(recs) > 0 {
		n := min(len(recs), sessionsBatch)
		if err := s.refreshBatch(ctx, recs[:n], now); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

func (s sessionsStore) refreshBatch(ctx context.Context, recs []lsc.Record, now time.Time) error {
	op := s.st.DB.NewOp(ctx)
	defer op.Close()
	return op.WriteCollection(ctx, sessionsNS, false, func(coll *index.Collection) error {
		if coll == nil {
			return mongoerr.Newf(mongoerr.NamespaceNotFound, "%s does not exist", sessionsNS)
		}
		for _, r := range recs {
			b := bsoncore.NewDocumentBuilder().
				AppendDocument("_id", lsidDoc(r.Key)).
				AppendDateTime("lastUse", now.UnixMilli())
			if r.User != "" {
				b = b.AppendDocument("user", bsoncore.NewDocumentBuilder().AppendString("name", r.User).Build())
			}
			doc := b.Build()
			rid, cur, found, err := coll.FindByID(op.RU, lsidValue(r.Key))
			if err != nil {
				return err
			}
			if !found {
				if _, err := coll.InsertDocument(op.RU, doc); err != nil {
					return err
				}
				continue
			}
			if r.User == "" {
				// Keep a user name recorded earlier ($set of lastUse alone).
				if u := cur.Lookup("user"); u.Type != 0 {
					doc = bsoncore.NewDocumentBuilder().
						AppendDocument("_id", lsidDoc(r.Key)).
						AppendDateTime("lastUse", now.UnixMilli()).
						AppendValue("user", u).Build()
				}
			}
			if err := coll.UpdateDocument(op.RU, rid, append(bsoncore.Document(nil), cur...), doc); err != nil {
				return err
			}
		}
		return nil
	})
}

// Remove deletes the records of keys, in batches.
func (s sessionsStore) Remove(ctx context.Context, keys []lsc.Key) error {
	if _, ok := s.st.DB.Catalog.Latest().ByNS(sessionsNS); !ok {
		return nil
	}
	for len(keys) > 0 {
		n := min(len(keys), sessionsBatch)
		batch := keys[:n]
		keys = keys[n:]
		op := s.st.DB.NewOp(ctx)
		err := op.WriteCollection(ctx, sessionsNS, false, func(coll *index.Collection) error {
			if coll == nil {
				return nil
			}
			for _, k := range batch {
				rid, cur, found, err := coll.FindByID(op.RU, lsidValue(k))
				if err != nil {
					return err
				}
				if found {
					if err := coll.DeleteDocument(op.RU, rid, append(bsoncore.Document(nil), cur...)); err != nil {
						return err
					}
				}
			}
			return nil
		})
		op.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// FindRemoved returns the keys without a record (read at the latest data: MongoDB reads with
// read concern local).
func (s sessionsStore) FindRemoved(ctx context.Context, keys []lsc.Key) ([]lsc.Key, error) {
	op := s.st.DB.NewOp(ctx)
	defer op.Close()
	_, coll, release, err := op.ReadCollection(ctx, sessionsNS)
	if err != nil {
		return nil, err
	}
	defer release()
	if coll == nil {
		return keys, nil
	}
	var out []lsc.Key
	for _, k := range keys {
		_, _, found, err := coll.FindByID(op.RU, lsidValue(k))
		if err != nil {
			return nil, err
		}
		if !found {
			out = append(out, k)
		}
	}
	return out, nil
}

// txnTable is config.transactions on st's storage (lsc.TxnTable).
type txnTable struct{ st *service.State }

// OlderThan scans the table for entries whose lastWriteDate is before t (an entry without
// one counts as old).
func (t txnTable) OlderThan(ctx context.Context, before time.Time) ([]lsc.TxnRecord, error) {
	op := t.st.DB.NewOp(ctx)
	defer op.Close()
	meta, coll, release, err := op.ReadCollection(ctx, transactionsNS)
	if err != nil {
		return nil, err
	}
	defer release()
	if coll == nil {
		return nil, nil
	}
	rd, err := op.ReadLocked(transactionsNS, meta, coll, operation.ReadAllRecords)
	if err != nil {
		return nil, err
	}
	cur, err := rd.Records(op.RU)
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	var out []lsc.TxnRecord
	for {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		_, raw, ok := cur.Next()
		if !ok {
			break
		}
		doc := bsoncore.Document(raw)
		if ms, ok := doc.Lookup("lastWriteDate").DateTimeOK(); ok && ms >= before.UnixMilli() {
			continue
		}
		id, ok := doc.Lookup("_id").DocumentOK()
		if !ok {
			continue
		}
		k, err := service.ParseLsid(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: id})
		if err != nil {
			continue // not a session's entry
		}
		out = append(out, lsc.TxnRecord{Key: k, ID: append([]byte(nil), id...)})
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("scan %s: %w", transactionsNS, err)
	}
	return out, nil
}

// Remove deletes the entries by their stored _id.
func (t txnTable) Remove(ctx context.Context, recs []lsc.TxnRecord) (int, error) {
	n := 0
	for len(recs) > 0 {
		k := min(len(recs), sessionsBatch)
		batch := recs[:k]
		recs = recs[k:]
		op := t.st.DB.NewOp(ctx)
		removed := 0
		err := op.WriteCollection(ctx, transactionsNS, false, func(coll *index.Collection) error {
			removed = 0
			if coll == nil {
				return nil
			}
			for _, r := range batch {
				rid, cur, found, err := coll.FindByID(op.RU, bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: r.ID})
				if err != nil {
					return err
				}
				if !found {
					continue
				}
				if err := coll.DeleteDocument(op.RU, rid, append(bsoncore.Document(nil), cur...)); err != nil {
					return err
				}
				removed++
			}
			return nil
		})
		op.Close()
		if err != nil {
			return n, err
		}
		n += removed
	}
	return n, nil
}

// sessionCacheStatus is serverStatus's logicalSessionRecordCache section.
func sessionCacheStatus(c *lsc.Cache) bsoncore.Document {
	s := c.Stats()
	return bsoncore.NewDocumentBuilder().
		AppendInt32("activeSessionsCount", int32(c.Len())).
		AppendInt32("sessionsCollectionJobCount", int32(s.SessionsCollectionJobCount)).
		AppendInt32("lastSessionsCollectionJobDurationMillis", int32(s.LastSessionsCollectionJobDurationMillis)).
		AppendDateTime("lastSessionsCollectionJobTimestamp", s.LastSessionsCollectionJobTimestamp.UnixMilli()).
		AppendInt32("lastSessionsCollectionJobEntriesRefreshed", int32(s.LastSessionsCollectionJobEntriesRefreshed)).
		AppendInt32("lastSessionsCollectionJobEntriesEnded", int32(s.LastSessionsCollectionJobEntriesEnded)).
		AppendInt32("lastSessionsCollectionJobCursorsClosed", int32(s.LastSessionsCollectionJobCursorsClosed)).
		AppendInt32("transactionReaperJobCount", int32(s.TransactionReaperJobCount)).
		AppendInt32("lastTransactionReaperJobDurationMillis", int32(s.LastTransactionReaperJobDurationMillis)).
		AppendDateTime("lastTransactionReaperJobTimestamp", s.LastTransactionReaperJobTimestamp.UnixMilli()).
		AppendInt32("lastTransactionReaperJobEntriesCleanedUp", int32(s.LastTransactionReaperJobEntriesCleanedUp)).
		Build()
}
