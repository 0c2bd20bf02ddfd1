package concern

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
)

// The cluster-wide default read and write concern (setDefaultRWConcern, MongoDB's
// ReadWriteConcernDefaults), kept in config.settings and cached per server.

const (
	settingsNS = "config.settings"
	settingsID = "ReadWriteConcernDefaults"
)

// defaultsValue is one snapshot of the defaults.
type defaultsValue struct {
	wc      WriteConcern // the default write concern (provenance implicitDefault or customDefault)
	wcSet   bool         // set by setDefaultRWConcern
	rcLevel string       // "" : implicit (local)
	// updateOpTime/updateWall are when setDefaultRWConcern last ran.
	updateTS   [2]uint32
	updateWall time.Time
	localWall  time.Time
}

// rwDefaults holds one server's defaults.
type rwDefaults struct {
	db     *operation.DB // where they are stored; nil in servers without storage
	mu     sync.Mutex
	loaded bool          // guarded by mu
	v      defaultsValue // guarded by mu
}

// defaults returns the server's defaults (db is the server's storage, fixed for its life).
func (s *ServerState) defaults(db *operation.DB) *rwDefaults {
	s.defaultsOnce.Do(func() { s.rwDefaults = &rwDefaults{db: db, v: implicitDefaults()} })
	return s.rwDefaults
}

func implicitDefaults() defaultsValue {
	return defaultsValue{wc: WriteConcern{wMode: "majority", provenance: provenanceImplicit}, localWall: time.Now()}
}

// get returns the defaults, loading the stored document the first time.
func (d *rwDefaults) get() defaultsValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.loaded && d.db != nil {
		d.loaded = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		doc, err := d.db.FirstDocument(ctx, settingsNS)
		cancel()
		if err == nil && doc != nil {
			if id, _ := lookup(doc, "_id").StringValueOK(); id == settingsID {
				if v, err := defaultsFromDoc(doc); err == nil {
					d.v = v
				}
			}
		}
	}
	return d.v
}

// defaultsFromDoc parses a stored defaults document.
func defaultsFromDoc(doc bsoncore.Document) (defaultsValue, error) {
	v := implicitDefaults()
	if wd, ok := lookup(doc, "defaultWriteConcern").DocumentOK(); ok {
		wc := WriteConcern{wNum: 1, provenance: provenanceCustom}
		if err := wc.parseDoc(wd, true); err != nil {
			return v, err
		}
		wc.provenance = provenanceCustom
		v.wc, v.wcSet = wc, true
	}
	if rd, ok := lookup(doc, "defaultReadConcern").DocumentOK(); ok {
		v.rcLevel, _ = lookup(rd, "level").StringValueOK()
	}
	if t, i, ok := lookup(doc, "updateOpTime").TimestampOK(); ok {
		v.updateTS = [2]uint32{t, i}
	}
	if ms, ok := lookup(doc, "updateWallClockTime").DateTimeOK(); ok {
		v.updateWall = time.UnixMilli(ms)
	}
	return v, nil
}

// appendReply appends getDefaultRWConcern's fields.
func (v defaultsValue) appendReply(b []byte) []byte {
	rl := v.rcLevel
	if rl == "" {
		rl = "local"
	}
	b = bsoncore.AppendDocumentElement(b, "defaultReadConcern", bsoncore.NewDocumentBuilder().AppendString("level", rl).Build())
	wcb := bsoncore.NewDocumentBuilder()
	if v.wc.wMode != "" {
		wcb.AppendString("w", v.wc.wMode)
	} else {
		wcb.AppendInt32("w", int32(v.wc.wNum))
	}
	if v.wc.jSet {
		wcb.AppendBoolean("j", v.wc.journal)
	}
	wcb.AppendInt32("wtimeout", int32(v.wc.wTimeout/time.Millisecond))
	b = bsoncore.AppendDocumentElement(b, "defaultWriteConcern", wcb.Build())
	if v.wcSet || v.rcLevel != "" {
		b = bsoncore.AppendTimestampElement(b, "updateOpTime", v.updateTS[0], v.updateTS[1])
		b = bsoncore.AppendDateTimeElement(b, "updateWallClockTime", v.updateWall.UnixMilli())
	}
	src := func(set bool) string {
		if set {
			return "global"
		}
		return "implicit"
	}
	b = bsoncore.AppendStringElement(b, "defaultWriteConcernSource", src(v.wcSet))
	b = bsoncore.AppendStringElement(b, "defaultReadConcernSource", src(v.rcLevel != ""))
	return bsoncore.AppendDateTimeElement(b, "localUpdateWallClockTime", v.localWall.UnixMilli())
}

func replyDoc(fill func([]byte) []byte) bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = fill(b)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// GetDefaults is getDefaultRWConcern's reply on a replica-set member.
func GetDefaults(n Node) bsoncore.Document {
	return replyDoc(n.State.defaults(n.DB).get().appendReply)
}

// SetDefaults is setDefaultRWConcern on a replica-set member: wv and rv are the command's
// defaultWriteConcern and defaultReadConcern (Type 0 when absent). It stores the new
// defaults in config.settings (a replicated write) and returns the command's reply.
func SetDefaults(ctx context.Context, n Node, wv, rv bsoncore.Value) (bsoncore.Document, error) {
	if wv.Type == 0 && rv.Type == 0 {
		return nil, mongoerr.New(mongoerr.BadValue,
			"At least one of the \"defaultReadConcern\" or \"defaultWriteConcern\" fields must be present")
	}
	d := n.State.defaults(n.DB)
	cur := d.get()
	next := cur
	if wv.Type != 0 {
		wd, ok := wv.DocumentOK()
		if !ok {
			return nil, typeMismatch("setDefaultRWConcern", "defaultWriteConcern", wv.Type, "object")
		}
		wc := WriteConcern{wNum: 1, provenance: provenanceCustom}
		if err := wc.parseDoc(wd, true); err != nil {
			return nil, err
		}
		if len(wd) <= 5 {
			// {} unsets the default write concern (back to the implicit majority).
			next.wc, next.wcSet = implicitDefaults().wc, false
		} else {
			if !wc.wSet {
				return nil, mongoerr.New(mongoerr.BadValue, "Default write concern must have 'w' field.")
			}
			if wc.w0 {
				return nil, mongoerr.New(mongoerr.BadValue, "Default write concern cannot be unacknowledged")
			}
			wc.provenance = provenanceCustom
			next.wc, next.wcSet = wc, true
		}
	}
	if rv.Type != 0 {
		rd, ok := rv.DocumentOK()
		if !ok {
			return nil, typeMismatch("setDefaultRWConcern", "defaultReadConcern", rv.Type, "object")
		}
		rc, err := ParseReadConcern(rd)
		if err != nil {
			return nil, err
		}
		switch {
		case rc.AfterClusterTime != 0 || rc.AtClusterTime != 0 || rc.AfterOpTimeSet:
			return nil, mongoerr.New(mongoerr.BadValue, "Default read concern must only contain a 'level' field.")
		case rc.Level == LevelSnapshot || rc.Level == LevelLinearizable:
			return nil, mongoerr.Newf(mongoerr.BadValue, "Default read concern level must be local, available or majority; found: %s", rc.Level)
		}
		next.rcLevel = rc.Level
	}
	now := time.Now()
	last := n.LastOp()
	next.updateTS = [2]uint32{last.TS.Secs(), last.TS.Inc()}
	next.updateWall, next.localWall = now, now
	stored := bsoncore.NewDocumentBuilder().AppendString("_id", settingsID)
	if next.wcSet {
		stored.AppendDocument("defaultWriteConcern", next.wc.ToBSON())
	}
	if next.rcLevel != "" {
		stored.AppendDocument("defaultReadConcern", bsoncore.NewDocumentBuilder().AppendString("level", next.rcLevel).Build())
	}
	stored.AppendTimestamp("updateOpTime", next.updateTS[0], next.updateTS[1]).AppendDateTime("updateWallClockTime", now.UnixMilli())
	if err := saveDefaults(ctx, n.DB, stored.Build()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.v, d.loaded = next, true
	d.mu.Unlock()
	return replyDoc(next.appendReply), nil
}

// saveDefaults upserts the defaults document into config.settings (a replicated write).
func saveDefaults(ctx context.Context, db *operation.DB, stored bsoncore.Document) error {
	if db == nil {
		return mongoerr.New(mongoerr.IllegalOperation, "this server has no storage engine")
	}
	op := db.NewOp(ctx)
	defer op.Close()
	return op.WriteCollection(ctx, settingsNS, true, func(coll *index.Collection) error {
		cur, err := coll.RecordStore().NewCursor(op.RU, false)
		if err != nil {
			return err
		}
		for {
			rid, old, ok := cur.Next()
			if !ok {
				break
			}
			if id, _ := lookup(old, "_id").StringValueOK(); id == settingsID {
				return coll.UpdateDocument(op.RU, rid, append(bsoncore.Document(nil), old...), stored)
			}
		}
		if err := cur.Err(); err != nil {
			return err
		}
		_, err = coll.InsertDocument(op.RU, stored)
		return err
	})
}
