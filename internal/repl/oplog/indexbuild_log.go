package oplog

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/storage"
)

// Two-phase index build entries (spec execution.md "Replica Set Index Builds"; MongoDB's
// OpObserverImpl::onStartIndexBuild / onCommitIndexBuild / onAbortIndexBuild):
//
//	{op: "c", ns: "<db>.$cmd", ui: <collection UUID>,
//	 o: {startIndexBuild | commitIndexBuild | abortIndexBuild: "<coll>",
//	     indexBuildUUID: <UUID>, indexes: [<spec>, ...],
//	     cause: {ok: false, code, codeName, errmsg}}}   // cause: abortIndexBuild only
//
// They are not part of opobserver.Observer: only the index build coordination (commands)
// writes them, and it finds these methods on the installed observer by interface.

// OnStartIndexBuild logs startIndexBuild in ru's unit (the unit that registers the build).
func (w *Writer) OnStartIndexBuild(ru *storage.RecoveryUnit, ns string, coll, build catalog.UUID, specs []bsoncore.Document) error {
	return w.logIndexBuild(ru, "startIndexBuild", ns, coll, build, specs, nil)
}

// OnCommitIndexBuild logs commitIndexBuild in ru's unit (the unit that marks the indexes
// ready), so the entry's timestamp is the commit timestamp.
func (w *Writer) OnCommitIndexBuild(ru *storage.RecoveryUnit, ns string, coll, build catalog.UUID, specs []bsoncore.Document) error {
	return w.logIndexBuild(ru, "commitIndexBuild", ns, coll, build, specs, nil)
}

// OnAbortIndexBuild logs abortIndexBuild with the cause in ru's unit (the unit that drops the
// indexes).
func (w *Writer) OnAbortIndexBuild(ru *storage.RecoveryUnit, ns string, coll, build catalog.UUID, specs []bsoncore.Document, cause error) error {
	if cause == nil {
		cause = mongoerr.New(mongoerr.IndexBuildAborted, "index build aborted")
	}
	return w.logIndexBuild(ru, "abortIndexBuild", ns, coll, build, specs, cause)
}

func (w *Writer) logIndexBuild(ru *storage.RecoveryUnit, kind, ns string, coll, build catalog.UUID, specs []bsoncore.Document, cause error) error {
	if !logged(ru, ns) {
		return nil
	}
	o, err := IndexBuildO(kind, ns, build, specs, cause)
	if err != nil {
		return err
	}
	return w.logCommand(ru, ns, &coll, o, nil)
}

// IndexBuildO builds the o field of a startIndexBuild, commitIndexBuild or abortIndexBuild
// entry (cause only for abortIndexBuild).
func IndexBuildO(kind, ns string, build catalog.UUID, specs []bsoncore.Document, cause error) (bsoncore.Document, error) {
	_, collName := catalog.SplitNS(ns)
	start, o := bsoncore.AppendDocumentStart(nil)
	o = bsoncore.AppendStringElement(o, kind, collName)
	o = bsoncore.AppendBinaryElement(o, "indexBuildUUID", 4, build[:])
	aidx, o := bsoncore.AppendArrayElementStart(o, "indexes")
	for i, s := range specs {
		sstart, so := bsoncore.AppendDocumentElementStart(o, itoa(i))
		els, err := s.Elements()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "index spec: %v", err)
		}
		for _, e := range els {
			if e.Key() == "ns" {
				continue
			}
			so = append(so, e...)
		}
		o, _ = bsoncore.AppendDocumentEnd(so, sstart)
	}
	o, _ = bsoncore.AppendArrayEnd(o, aidx)
	if cause != nil {
		cstart, co := bsoncore.AppendDocumentElementStart(o, "cause")
		code := mongoerr.CodeOf(cause)
		msg := cause.Error()
		if me, ok := mongoerr.As(cause); ok && me.Msg != "" {
			msg = me.Msg
		}
		co = bsoncore.AppendBooleanElement(co, "ok", false)
		co = bsoncore.AppendInt32Element(co, "code", int32(code))
		co = bsoncore.AppendStringElement(co, "codeName", code.Name())
		co = bsoncore.AppendStringElement(co, "errmsg", msg)
		o, _ = bsoncore.AppendDocumentEnd(co, cstart)
	}
	o, _ = bsoncore.AppendDocumentEnd(o, start)
	return o, nil
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
