package commands

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/lock"
	"humongo/internal/service"
)

// appendTicketsSection appends serverStatus.wiredTiger.concurrentTransactions, where mongod 7.0
// reports its admission-control pools (8.0 moved them to queues.execution): per pool the
// tickets out, available and in total, then the queueing counters 6.1+ added.
func appendTicketsSection(b []byte, st *service.State, want func(string) bool) []byte {
	if st.DB == nil || !want("wiredTiger") {
		return b
	}
	ts := st.DB.Locks.Tickets()
	pool := func(h *lock.TicketHolder) bsoncore.Document {
		s := h.Stats()
		return bsoncore.NewDocumentBuilder().
			AppendInt32("out", int32(s.Out)).
			AppendInt32("available", int32(s.Available)).
			AppendInt32("totalTickets", int32(s.Total)).
			AppendInt64("addedToQueue", s.AddedToQueue).
			AppendInt64("removedFromQueue", s.RemovedFromQueue).
			AppendInt64("queueLength", s.QueueLength).
			AppendInt64("startedProcessing", s.StartedProcessing).
			AppendInt64("processing", s.Processing).
			AppendInt64("finishedProcessing", s.FinishedProcessing).
			AppendInt64("canceled", s.Canceled).
			AppendInt64("newAdmissions", s.NewAdmissions).
			AppendInt64("totalTimeQueuedMicros", s.TotalTimeQueuedMicros).
			Build()
	}
	ct := bsoncore.NewDocumentBuilder().
		AppendDocument("write", pool(ts.Write)).
		AppendDocument("read", pool(ts.Read)).
		Build()
	return bsoncore.AppendDocumentElement(b, "wiredTiger", bsoncore.NewDocumentBuilder().
		AppendDocument("concurrentTransactions", ct).Build())
}
