package commands

import (
	"bytes"
	"context"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/lock"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addCurrentOp(r *service.Registry) {
	add(r, &service.Command{
		Name:      "currentOp",
		Auth:      service.AuthCurrentOp,
		Handler:   runCurrentOp,
		Help:      "{currentOp: 1, $all: <bool>, <filter>...} lists operations in progress",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

// runCurrentOp lists in-progress operations from the connection registry. {$all: true} adds
// idle connections. Other non-generic fields form a filter over the reported documents; the
// filter language is equality, $eq, $ne, $exists and $in on (dotted) fields until the query
// package's matcher can be used here. With {$ownOps: true} and authorization on, only the
// operations of the user's own connections are listed (that is all a user without inprog
// may see).
func runCurrentOp(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	all := truthy(lookup(cmd, "$all"))
	ownOps := truthy(lookup(cmd, "$ownOps"))
	elems, err := cmd.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid command: %v", err)
	}
	var filter []bsoncore.Element
	for _, e := range elems[1:] {
		k := e.Key()
		if service.GenericArguments[k] || k == "$all" || k == "$ownOps" || k == "$truncateOps" {
			continue
		}
		filter = append(filter, e)
	}
	host, _ := os.Hostname()
	now := time.Now()
	b := make([]byte, 0, 1024)
	idx, b := bsoncore.AppendDocumentStart(b)
	ai, b := bsoncore.AppendArrayElementStart(b, "inprog")
	n := 0
	for _, c := range env.State.Clients.Conns() {
		op, meta, app := c.Snapshot()
		if op == nil && !all {
			continue
		}
		if ownOps && !ownsConn(env.Auth, c) {
			continue
		}
		d := currentOpDoc(host, now, c, op, meta, app)
		if !matchFilter(d, filter) {
			continue
		}
		b = bsoncore.AppendDocumentElement(b, itoa(int64(n)), d)
		n++
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}

// ownsConn reports whether s's user is c's (always when authorization is off).
func ownsConn(s *service.AuthSession, c *service.Conn) bool {
	return s.IsCoauthorizedWith(c.Users())
}

func currentOpDoc(host string, now time.Time, c *service.Conn, op *service.Op, meta bsoncore.Document, app string) bsoncore.Document {
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "type", "op")
		b = bsoncore.AppendStringElement(b, "host", host)
		b = bsoncore.AppendStringElement(b, "desc", c.Desc())
		b = bsoncore.AppendInt64Element(b, "connectionId", c.ID)
		b = bsoncore.AppendStringElement(b, "client", c.Remote)
		if app != "" {
			b = bsoncore.AppendStringElement(b, "appName", app)
		}
		if meta != nil {
			b = bsoncore.AppendDocumentElement(b, "clientMetadata", meta)
		}
		if users := c.Users(); len(users) > 0 {
			b = auth.AppendUserNames(b, "effectiveUsers", users)
		}
		b = bsoncore.AppendBooleanElement(b, "active", op != nil)
		b = bsoncore.AppendDateTimeElement(b, "currentOpTime", now.UnixMilli())
		if op == nil {
			return b
		}
		running := now.Sub(op.Start)
		b = bsoncore.AppendInt64Element(b, "opid", op.ID)
		b = bsoncore.AppendInt64Element(b, "secs_running", int64(running.Seconds()))
		b = bsoncore.AppendInt64Element(b, "microsecs_running", running.Microseconds())
		b = bsoncore.AppendStringElement(b, "op", "command")
		b = bsoncore.AppendStringElement(b, "ns", op.Namespace())
		b = bsoncore.AppendDocumentElement(b, "command", op.Cmd)
		// numYields counts the plan yields of the command so far; locks are the lock types
		// its lockers hold now with their strongest modes (r, w, R, W); waitingForLock is
		// whether one of them is blocked.
		b = bsoncore.AppendInt32Element(b, "numYields", int32(min(op.Stats.Yields.Load(), 1<<31-1)))
		li, lb := bsoncore.AppendDocumentElementStart(b, "locks")
		for _, h := range op.Stats.HeldLocks() {
			lb = bsoncore.AppendStringElement(lb, h.Name, lock.ModeKey(h.Mode))
		}
		b, _ = bsoncore.AppendDocumentEnd(lb, li)
		b = bsoncore.AppendBooleanElement(b, "waitingForLock", op.Stats.WaitingForLock())
		if op.Killed() {
			b = bsoncore.AppendBooleanElement(b, "killPending", true)
		}
		return b
	})
}

// matchFilter applies the small currentOp filter language to d.
func matchFilter(d bsoncore.Document, filter []bsoncore.Element) bool {
	for _, f := range filter {
		v, err := d.LookupErr(strings.Split(f.Key(), ".")...)
		present := err == nil
		fv := f.Value()
		if ops, ok := fv.DocumentOK(); ok && isOperatorDoc(ops) {
			oe, _ := ops.Elements()
			for _, o := range oe {
				ov := o.Value()
				switch o.Key() {
				case "$eq":
					if !present || !valuesEqual(v, ov) {
						return false
					}
				case "$ne":
					if present && valuesEqual(v, ov) {
						return false
					}
				case "$exists":
					if present != truthy(ov) {
						return false
					}
				case "$in":
					arr, ok := ov.ArrayOK()
					if !ok || !present {
						return false
					}
					vals, _ := arr.Values()
					found := false
					for _, x := range vals {
						found = found || valuesEqual(v, x)
					}
					if !found {
						return false
					}
				default:
					return false
				}
			}
			continue
		}
		if !present || !valuesEqual(v, fv) {
			return false
		}
	}
	return true
}

func isOperatorDoc(d bsoncore.Document) bool {
	e, err := d.IndexErr(0)
	return err == nil && strings.HasPrefix(e.Key(), "$")
}

// valuesEqual compares numbers by value and everything else byte for byte.
func valuesEqual(a, b bsoncore.Value) bool {
	fa, oka := service.AsFloat(a)
	fb, okb := service.AsFloat(b)
	if oka && okb {
		return fa == fb
	}
	return a.Type == b.Type && bytes.Equal(a.Data, b.Data)
}
