package concern

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/coord"
)

// WriteConcern is a command's parsed (or defaulted) writeConcern.
type WriteConcern struct {
	w0      bool // {w: 0}: unacknowledged
	journal bool // j: true (or fsync: true): wait for the journal before replying
	// jSet records an explicit j (serialized back in errInfo.writeConcern); fsync an
	// explicit fsync: true.
	jSet, fsync bool
	wSet        bool          // the client gave w
	wNum        int           // numeric w (1 when absent)
	wMode       string        // "majority" or a custom mode name; "" for numeric w
	wTimeout    time.Duration // 0: no limit other than maxTimeMS
	// provenance is WriteConcernOptions' provenance: clientSupplied, implicitDefault,
	// customDefault.
	provenance string
}

// provenanceClient etc. are ReadWriteConcernProvenance's sources.
const (
	provenanceClient   = "clientSupplied"
	provenanceImplicit = "implicitDefault"
	provenanceCustom   = "customDefault"
)

// ParseWriteConcern parses and validates a write command's writeConcern. On a standalone
// (validateWriteConcern): w may be 0, 1 or "majority" (which a standalone satisfies on its
// own); w > 1 and custom modes are BadValue. On a replica-set member any w up to 50 and any
// mode name parse (an unknown mode fails after the write, as UnknownReplWriteConcern in
// writeConcernError; a known one waits for members whose tags satisfy it), and a command
// without w takes the cluster-wide default w ("majority" unless setDefaultRWConcern changed
// it).
func ParseWriteConcern(n Node, cmd bsoncore.Document) (WriteConcern, error) {
	wc := WriteConcern{wNum: 1, provenance: provenanceClient}
	repl := n.Repl != nil
	v := lookup(cmd, "writeConcern")
	if v.Type != 0 {
		d, ok := v.DocumentOK()
		if !ok {
			return wc, mongoerr.Newf(mongoerr.TypeMismatch,
				"BSON field 'writeConcern' is the wrong type '%s', expected type 'object'", typeName(v.Type))
		}
		if err := wc.parseDoc(d, repl); err != nil {
			return wc, err
		}
	}
	if repl && !wc.wSet {
		def := n.State.defaults(n.DB).get()
		if len(v.Data) <= 5 { // absent or {}
			// No writeConcern at all: the whole default applies, with its provenance.
			dwc := def.wc
			dwc.journal = dwc.journal || wc.journal
			return dwc, nil
		}
		// {j: true} or {wtimeout} alone: only w comes from the default.
		wc.wNum, wc.wMode, wc.w0 = def.wc.wNum, def.wc.wMode, def.wc.w0
	}
	return wc, nil
}

// parseDoc reads the fields of a writeConcern document into wc.
func (wc *WriteConcern) parseDoc(d bsoncore.Document, repl bool) error {
	elems, err := d.Elements()
	if err != nil {
		return mongoerr.Newf(mongoerr.InvalidBSON, "invalid writeConcern: %v", err)
	}
	jTrue := false
	for _, e := range elems {
		ev := e.Value()
		switch e.Key() {
		case "w":
			wc.wSet = true
			switch ev.Type {
			case bsoncore.TypeString:
				mode := ev.StringValue()
				if mode != "majority" && !repl {
					return mongoerr.Newf(mongoerr.BadValue,
						"cannot use non-majority 'w' mode %s when a host is not a member of a replica set", mode)
				}
				wc.wMode, wc.wNum = mode, 0
			case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
				f := asFloat(ev)
				if f < 0 || f > 50 {
					return mongoerr.Newf(mongoerr.FailedToParse,
						"w has to be a non-negative number and not greater than 50; found: %v", f)
				}
				if f > 1 && !repl {
					return mongoerr.New(mongoerr.BadValue, "cannot use 'w' > 1 when a host is not replicated")
				}
				wc.wNum, wc.wMode = int(f), ""
				wc.w0 = wc.wNum == 0
			default:
				return mongoerr.Newf(mongoerr.FailedToParse, "w has to be a number or string; found: %s", typeName(ev.Type))
			}
		case "j", "fsync":
			switch ev.Type {
			case bsoncore.TypeBoolean, bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
				if e.Key() == "j" {
					wc.jSet = true
				}
				if truthy(ev) {
					jTrue = jTrue || e.Key() == "j"
					wc.journal = true
					wc.fsync = wc.fsync || e.Key() == "fsync"
				}
			case bsoncore.TypeNull, bsoncore.TypeUndefined:
			default:
				return mongoerr.Newf(mongoerr.TypeMismatch,
					"BSON field 'writeConcern.%s' is the wrong type '%s', expected types '[bool, long, int, decimal, double]'", e.Key(), typeName(ev.Type))
			}
		case "wtimeout", "wtimeoutMS":
			f, ok := bsonutil.ToFloat64(ev)
			if !ok && ev.Type != bsoncore.TypeNull {
				return mongoerr.Newf(mongoerr.TypeMismatch,
					"BSON field 'writeConcern.%s' is the wrong type '%s', expected types '[int, decimal, double, long]'", e.Key(), typeName(ev.Type))
			}
			if f > 0 {
				wc.wTimeout = time.Duration(f) * time.Millisecond
			}
		case "provenance":
			if s, ok := ev.StringValueOK(); ok {
				wc.provenance = s
			}
		case "getLastError", "getlasterror", "wOpTime", "wElectionId":
		default:
			return mongoerr.Newf(codeUnknownField, "BSON field 'writeConcern.%s' is an unknown field.", e.Key())
		}
	}
	if jTrue && wc.fsync {
		return mongoerr.New(mongoerr.FailedToParse, "fsync and j options cannot be used together")
	}
	return nil
}

// ToBSON is WriteConcernOptions::toBSON: {w, j?|fsync?, wtimeout, provenance}.
func (wc WriteConcern) ToBSON() bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	if wc.wMode != "" {
		b.AppendString("w", wc.wMode)
	} else {
		b.AppendInt32("w", int32(wc.wNum))
	}
	switch {
	case wc.fsync:
		b.AppendBoolean("fsync", true)
	case wc.journal:
		b.AppendBoolean("j", true)
	case wc.jSet:
		b.AppendBoolean("j", false)
	}
	b.AppendInt32("wtimeout", int32(wc.wTimeout/time.Millisecond))
	b.AppendString("provenance", wc.provenance)
	return b.Build()
}

// WriteConcernReply is what a write command returns when its writes are done but waiting
// for the write concern failed: the dispatcher replies `ok: 1` with Reply's fields followed
// by `writeConcernError: WCE`.
type WriteConcernReply struct {
	Reply bsoncore.Document
	WCE   bsoncore.Document
	// Code is the write concern error's code (for logs and labels).
	Code mongoerr.Code
}

func (r *WriteConcernReply) Error() string {
	msg, _ := lookup(r.WCE, "errmsg").StringValueOK()
	return "write concern error: " + msg
}

// WaitForWrite waits for wc after a write command's writes and returns its reply, or a
// *WriteConcernReply when the wait failed. On a replica set the wait is for the client's
// last op: the newest oplog entry written when the command's writes are done (which is at
// or after every entry the command wrote; a command that wrote nothing waits for the
// system's last op, as MongoDB's setLastOpToSystemLastOpTime does).
func WaitForWrite(ctx context.Context, n Node, wc WriteConcern, reply bsoncore.Document) (bsoncore.Document, error) {
	rc := n.Repl
	if rc == nil {
		if wc.journal && n.DB != nil {
			if err := n.DB.Engine.WaitUntilDurable(ctx); err != nil {
				return nil, err
			}
		}
		return reply, nil
	}
	last := n.LastOp()
	NoteOperationTime(ctx, last.TS)
	if wc.w0 {
		return reply, nil
	}
	// A custom mode (settings.getLastErrorModes) is looked up by the coordinator in the
	// config current at the time of the wait: an unknown one fails after the write, as
	// UnknownReplWriteConcern in writeConcernError, as in MongoDB.
	cw := coord.WriteConcern{W: wc.wNum, Majority: wc.wMode == "majority", J: wc.journal, WTimeout: wc.wTimeout}
	if wc.wMode != "majority" {
		cw.Mode = wc.wMode
	}
	err := rc.WaitForWriteConcern(ctx, last, cw)
	if err == nil {
		return reply, nil
	}
	if ctx.Err() != nil {
		if c := context.Cause(ctx); c != nil {
			err = c
		}
	}
	me := toMongoErr(err)
	return nil, &WriteConcernReply{Reply: reply, WCE: errorDoc(me, wc), Code: me.Code}
}

// toMongoErr is err with a code: context errors become MaxTimeMSExpired / Interrupted,
// anything uncoded InternalError.
func toMongoErr(err error) *mongoerr.Error {
	if me, ok := mongoerr.As(err); ok {
		return me
	}
	switch err {
	case context.DeadlineExceeded:
		return mongoerr.New(mongoerr.MaxTimeMSExpired, "operation exceeded time limit")
	case context.Canceled:
		return mongoerr.New(mongoerr.Interrupted, "operation was interrupted")
	}
	return &mongoerr.Error{Code: mongoerr.InternalError, Msg: err.Error()}
}

// errorDoc is WriteConcernErrorDetail as 7.0 serializes it: {code, codeName, errmsg,
// errInfo: {wtimeout?: true, writeConcern: <the concern used>}}.
func errorDoc(me *mongoerr.Error, wc WriteConcern) bsoncore.Document {
	info := bsoncore.NewDocumentBuilder()
	if me.Code == mongoerr.WriteConcernFailed {
		info.AppendBoolean("wtimeout", true)
	}
	info.AppendDocument("writeConcern", wc.ToBSON())
	msg := me.Msg
	if msg == "" && me.Err != nil {
		msg = me.Err.Error()
	}
	return bsoncore.NewDocumentBuilder().
		AppendInt32("code", int32(me.Code)).
		AppendString("codeName", me.Code.Name()).
		AppendString("errmsg", msg).
		AppendDocument("errInfo", info.Build()).Build()
}

// LastOp is the OpTime a write command waits for: the oplog writer's last written entry,
// or the coordinator's lastApplied when the observer is not the writer. Replica-set members
// only (n.Repl set).
func (n Node) LastOp() optime.OpTime {
	if n.DB != nil {
		if lw, ok := n.DB.Observer().(lastWritten); ok {
			if o := lw.LastWritten(); o.TS != 0 {
				return o
			}
		}
	}
	return n.Repl.LastApplied()
}
