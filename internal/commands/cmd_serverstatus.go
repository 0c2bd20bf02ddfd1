package commands

import (
	"context"
	"os"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

func addServerStatus(r *service.Registry) {
	add(r, &service.Command{
		Name:      "serverStatus",
		Auth:      service.AuthOnCluster(auth.ServerStatus),
		Handler:   runServerStatus,
		Help:      "returns lots of administrative server statistics",
		Secondary: service.SecondaryAlways,
	})
}

// runServerStatus reports the sections that exist so far. Each section can be suppressed
// with {<section>: 0}, as in mongod.
func runServerStatus(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	st := env.State
	c := &st.Counters
	want := service.ServerStatusWant(cmd)
	return doc(func(b []byte) []byte {
		b = service.AppendServerStatusBase(b, env, "humongod", want)
		b = appendServerStatusShapes(b, env, want)
		if want("mem") {
			res, virt := procMemMB()
			b = bsoncore.AppendDocumentElement(b, "mem", bsoncore.NewDocumentBuilder().
				AppendInt32("bits", 64).
				AppendInt64("resident", res).
				AppendInt64("virtual", virt).
				AppendBoolean("supported", res > 0).Build())
		}
		if want("tcmalloc") {
			b = appendHeapSection(b)
		}
		if want("logicalSessionRecordCache") {
			b = bsoncore.AppendDocumentElement(b, "logicalSessionRecordCache", sessionCacheStatus(st.Sessions))
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
		b = appendTicketsSection(b, st, want)
		if want("sharding") {
			b = st.Sharding.AppendServerStatus(b)
		}
		if want("shardingStatistics") {
			b = appendMigrationStatistics(b, st)
		}
		if want("twoPhaseCommitCoordinator") {
			b = appendTxnCoordinatorStatus(b, st)
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

func parseInt(s string) int64 {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
