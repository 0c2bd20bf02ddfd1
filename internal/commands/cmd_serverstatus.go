package commands

import (
	"context"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addServerStatus(r *service.Registry) {
	add(r, &service.Command{
		Name:         "serverStatus",
		Handler:      runServerStatus,
		Help:         "returns lots of administrative server statistics",
		Secondary:    service.SecondaryAlways,
		RequiresAuth: true,
	})
}

// runServerStatus reports the sections that exist so far. Each section can be suppressed
// with {<section>: 0}, as in mongod.
func runServerStatus(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	st := env.State
	c := &st.Counters
	want := func(section string) bool {
		v := lookup(cmd, section)
		return v.Type == 0 || truthy(v)
	}
	now := time.Now()
	up := now.Sub(st.StartTime)
	current, active := st.Clients.Len()
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "host", st.Host)
		b = bsoncore.AppendStringElement(b, "version", service.Version)
		b = bsoncore.AppendStringElement(b, "process", "humongod")
		b = bsoncore.AppendInt64Element(b, "pid", int64(st.Pid))
		b = bsoncore.AppendDoubleElement(b, "uptime", float64(int64(up.Seconds())))
		b = bsoncore.AppendInt64Element(b, "uptimeMillis", up.Milliseconds())
		b = bsoncore.AppendInt64Element(b, "uptimeEstimate", int64(up.Seconds()))
		b = bsoncore.AppendDateTimeElement(b, "localTime", now.UnixMilli())
		if want("connections") {
			avail := int64(st.MaxIncomingConnections) - int64(current)
			b = bsoncore.AppendDocumentElement(b, "connections", bsoncore.NewDocumentBuilder().
				AppendInt32("current", int32(current)).
				AppendInt32("available", int32(max(avail, 0))).
				AppendInt32("totalCreated", int32(c.ConnsCreated.Load())).
				AppendInt32("active", int32(active)).Build())
		}
		if want("network") {
			b = bsoncore.AppendDocumentElement(b, "network", bsoncore.NewDocumentBuilder().
				AppendInt64("bytesIn", c.BytesIn.Load()).
				AppendInt64("bytesOut", c.BytesOut.Load()).
				AppendInt64("physicalBytesIn", c.BytesIn.Load()).
				AppendInt64("physicalBytesOut", c.BytesOut.Load()).
				AppendInt64("numRequests", c.NumRequests.Load()).Build())
		}
		if want("opcounters") {
			b = bsoncore.AppendDocumentElement(b, "opcounters", bsoncore.NewDocumentBuilder().
				AppendInt64("insert", c.Insert.Load()).
				AppendInt64("query", c.Query.Load()).
				AppendInt64("update", c.Update.Load()).
				AppendInt64("delete", c.Delete.Load()).
				AppendInt64("getmore", c.GetMore.Load()).
				AppendInt64("command", c.Command.Load()).Build())
		}
		if want("mem") {
			res, virt := procMemMB()
			b = bsoncore.AppendDocumentElement(b, "mem", bsoncore.NewDocumentBuilder().
				AppendInt32("bits", 64).
				AppendInt64("resident", res).
				AppendInt64("virtual", virt).
				AppendBoolean("supported", res > 0).Build())
		}
		if want("logicalSessionRecordCache") {
			b = bsoncore.AppendDocumentElement(b, "logicalSessionRecordCache", bsoncore.NewDocumentBuilder().
				AppendInt32("activeSessionsCount", int32(st.Sessions.Len())).Build())
		}
		if want("metrics") {
			idx, mb := bsoncore.AppendDocumentElementStart(b, "metrics")
			mb = bsoncore.AppendDocumentElement(mb, "document", bsoncore.NewDocumentBuilder().
				AppendInt64("deleted", c.DocsDeleted.Load()).
				AppendInt64("inserted", c.DocsInserted.Load()).
				AppendInt64("returned", c.DocsReturned.Load()).
				AppendInt64("updated", c.DocsUpdated.Load()).Build())
			open := bsoncore.NewDocumentBuilder().
				AppendInt64("noTimeout", c.CursorsOpenNoTimeout.Load()).
				AppendInt64("pinned", c.CursorsOpenPinned.Load()).
				AppendInt64("total", c.CursorsOpenTotal.Load()).Build()
			mb = bsoncore.AppendDocumentElement(mb, "cursor", bsoncore.NewDocumentBuilder().
				AppendInt64("timedOut", c.CursorsTimedOut.Load()).
				AppendInt64("totalOpened", c.CursorsTotalOpened.Load()).
				AppendDocument("open", open).Build())
			b, _ = bsoncore.AppendDocumentEnd(mb, idx)
		}
		return b
	}), nil
}

// procMemMB returns resident and virtual memory in MiB from /proc/self/status (0, 0 when
// unavailable), the figures mongod's mem section shows.
func procMemMB() (resident, virtual int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			resident = parseInt(strings.TrimSpace(v)) / 1024
		} else if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			virtual = parseInt(strings.TrimSpace(v)) / 1024
		}
	}
	return resident, virtual
}
