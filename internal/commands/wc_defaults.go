package commands

// Cluster-wide read and write concern defaults (MongoDB 7.0's ReadWriteConcernDefaults and
// the getDefaultRWConcern / setDefaultRWConcern commands). The implicit default of a replica
// set is {w: "majority"} and {level: "local"}; setDefaultRWConcern stores the new defaults in
// config.settings under _id "ReadWriteConcernDefaults" (a replicated write, so every member
// sees them) and in memory. A member loads the stored document on first use.

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
)

func init() {
	register(&Command{
		Name:      "getDefaultRWConcern",
		Handler:   runGetDefaultRWConcern,
		Help:      "Get the current read and write concern defaults being applied by this server.",
		AdminOnly: true,
		Secondary: SecondaryAlways,
	})
	register(&Command{
		Name:      "setDefaultRWConcern",
		Handler:   runSetDefaultRWConcern,
		Help:      "Set the cluster-wide default read and write concern.",
		AdminOnly: true,
		Writes:    true,
	})
}

// codeRWCStandalone is Location51300 ("'<cmd>' is not supported on standalone nodes."); it
// belongs in mongoerr (reported to the lead).
const codeRWCStandalone = mongoerr.Location51300

const (
	rwcSettingsNS = "config.settings"
	rwcSettingsID = "ReadWriteConcernDefaults"
)

// rwDefaultsValue is one snapshot of the defaults.
type rwDefaultsValue struct {
	wc      writeConcern // the default write concern (provenance implicitDefault or customDefault)
	wcSet   bool         // set by setDefaultRWConcern
	rcLevel string       // "" : implicit (local)
	// updateOpTime/updateWall are when setDefaultRWConcern last ran.
	updateTS   [2]uint32
	updateWall time.Time
	localWall  time.Time
}

// rwDefaults holds one server's defaults.
type rwDefaults struct {
	st     *State
	mu     sync.Mutex
	loaded bool
	v      rwDefaultsValue
}

func rwDefaultsFor(st *State) *rwDefaults {
	l := &st.local
	l.rwDefaultsOnce.Do(func() { l.rwDefaults = &rwDefaults{st: st, v: rwImplicit()} })
	return l.rwDefaults
}

func rwImplicit() rwDefaultsValue {
	return rwDefaultsValue{wc: writeConcern{wMode: "majority", provenance: wcProvenanceImplicit}, localWall: time.Now()}
}

// get returns the defaults, loading the stored document the first time.
func (d *rwDefaults) get() rwDefaultsValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.loaded && d.st.DB != nil {
		d.loaded = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		doc, err := ReplStore{DB: d.st.DB}.Load(ctx, rwcSettingsNS)
		cancel()
		if err == nil && doc != nil {
			if id, _ := lookup(doc, "_id").StringValueOK(); id == rwcSettingsID {
				if v, err := rwFromDoc(doc); err == nil {
					d.v = v
				}
			}
		}
	}
	return d.v
}

// rwFromDoc parses a stored defaults document.
func rwFromDoc(doc bsoncore.Document) (rwDefaultsValue, error) {
	v := rwImplicit()
	if wd, ok := lookup(doc, "defaultWriteConcern").DocumentOK(); ok {
		wc := writeConcern{wNum: 1, provenance: wcProvenanceCustom}
		if err := wc.parseDoc(wd, true); err != nil {
			return v, err
		}
		wc.provenance = wcProvenanceCustom
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
func (v rwDefaultsValue) appendReply(b []byte) []byte {
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

func runGetDefaultRWConcern(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if env.State.Repl == nil {
		return nil, mongoerr.Newf(codeRWCStandalone, "'%s' is not supported on standalone nodes.", "getDefaultRWConcern")
	}
	v := rwDefaultsFor(env.State).get()
	return doc(v.appendReply), nil
}

func runSetDefaultRWConcern(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if env.State.Repl == nil {
		return nil, mongoerr.Newf(codeRWCStandalone, "'%s' is not supported on standalone nodes.", "setDefaultRWConcern")
	}
	if err := checkStrict(cmd, "setDefaultRWConcern", "defaultReadConcern", "defaultWriteConcern"); err != nil {
		return nil, err
	}
	wv, rv := lookup(cmd, "defaultWriteConcern"), lookup(cmd, "defaultReadConcern")
	if wv.Type == 0 && rv.Type == 0 {
		return nil, mongoerr.New(mongoerr.BadValue,
			"At least one of the \"defaultReadConcern\" or \"defaultWriteConcern\" fields must be present")
	}
	d := rwDefaultsFor(env.State)
	cur := d.get()
	next := cur
	if wv.Type != 0 {
		wd, ok := wv.DocumentOK()
		if !ok {
			return nil, typeMismatch("setDefaultRWConcern", "defaultWriteConcern", wv.Type, "object")
		}
		wc := writeConcern{wNum: 1, provenance: wcProvenanceCustom}
		if err := wc.parseDoc(wd, true); err != nil {
			return nil, err
		}
		if len(wd) <= 5 {
			// {} unsets the default write concern (back to the implicit majority).
			next.wc, next.wcSet = rwImplicit().wc, false
		} else {
			if !wc.wSet {
				return nil, mongoerr.New(mongoerr.BadValue, "Default write concern must have 'w' field.")
			}
			if wc.w0 {
				return nil, mongoerr.New(mongoerr.BadValue, "Default write concern cannot be unacknowledged")
			}
			wc.provenance = wcProvenanceCustom
			next.wc, next.wcSet = wc, true
		}
	}
	if rv.Type != 0 {
		rd, ok := rv.DocumentOK()
		if !ok {
			return nil, typeMismatch("setDefaultRWConcern", "defaultReadConcern", rv.Type, "object")
		}
		rc, err := rcParse(rd)
		if err != nil {
			return nil, err
		}
		switch {
		case rc.afterClusterTime != 0 || rc.atClusterTime != 0 || rc.afterOpTimeSet:
			return nil, mongoerr.New(mongoerr.BadValue, "Default read concern must only contain a 'level' field.")
		case rc.level == rcSnapshot || rc.level == rcLinearizable:
			return nil, mongoerr.Newf(mongoerr.BadValue, "Default read concern level must be local, available or majority; found: %s", rc.level)
		}
		next.rcLevel = rc.level
	}
	now := time.Now()
	last := wcLastOp(env)
	next.updateTS = [2]uint32{last.TS.Secs, last.TS.Inc}
	next.updateWall, next.localWall = now, now
	stored := bsoncore.NewDocumentBuilder().AppendString("_id", rwcSettingsID)
	if next.wcSet {
		stored.AppendDocument("defaultWriteConcern", next.wc.toBSON())
	}
	if next.rcLevel != "" {
		stored.AppendDocument("defaultReadConcern", bsoncore.NewDocumentBuilder().AppendString("level", next.rcLevel).Build())
	}
	stored.AppendTimestamp("updateOpTime", next.updateTS[0], next.updateTS[1]).AppendDateTime("updateWallClockTime", now.UnixMilli())
	if err := rwSave(ctx, env.State.DB, stored.Build()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.v, d.loaded = next, true
	d.mu.Unlock()
	return doc(next.appendReply), nil
}

// rwSave upserts the defaults document into config.settings (a replicated write).
func rwSave(ctx context.Context, db *operation.DB, stored bsoncore.Document) error {
	if db == nil {
		return mongoerr.New(mongoerr.IllegalOperation, "this server has no storage engine")
	}
	op := db.NewOp(ctx)
	defer op.Close()
	return op.WriteCollection(ctx, rwcSettingsNS, true, func(coll *index.Collection) error {
		cur, err := coll.RecordStore().NewCursor(op.RU, false)
		if err != nil {
			return err
		}
		for {
			rid, old, ok := cur.Next()
			if !ok {
				break
			}
			if id, _ := lookup(old, "_id").StringValueOK(); id == rwcSettingsID {
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
