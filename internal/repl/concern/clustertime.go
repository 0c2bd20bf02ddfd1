package concern

import (
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/coord"
	"humongo/internal/vclock"
)

// ServerState is one server's concern state: its vector clock and its default read/write
// concern. Its zero value is ready; a server owns one and drops it with itself.
type ServerState struct {
	// Clock is the server's vector clock; concern gossips it in and out and advances its
	// ClusterTime to the node's newest oplog entry.
	Clock vclock.Clock

	defaultsOnce sync.Once
	rwDefaults   *rwDefaults
}

// clusterTimeNow is the node's cluster time: the newest of what it gossiped in and its own
// newest oplog entry.
func (n Node) clusterTimeNow() uint64 {
	n.State.Clock.AdvanceCluster(n.lastOpTS())
	return uint64(n.State.Clock.ClusterTime())
}

// lastWritten is the oplog writer's view of its newest committed entry.
type lastWritten interface{ LastWritten() optime.OpTime }

// lastOpTS is the timestamp of the node's newest oplog entry without taking the
// coordinator's mutex.
func (n Node) lastOpTS() optime.Timestamp {
	if n.DB != nil {
		if lw, ok := n.DB.Observer().(lastWritten); ok {
			return lw.LastWritten().TS
		}
	}
	return 0
}

// AppendClusterTime appends `$clusterTime` and `operationTime` to a replica-set member's
// reply to p; standalone replies are returned unchanged (MongoDB's standalone gossips
// nothing). $clusterTime is signed for p (vclock.Clock.SignatureFor): under authorization, a
// sender without advanceClusterTime gets a real signature, or neither field while the node
// has no signing key yet (MongoDB's appendClusterAndOperationTime).
func AppendClusterTime(n Node, s *OpState, reply bsoncore.Document, p vclock.Peer) bsoncore.Document {
	if n.Repl == nil || len(reply) < 5 {
		return reply
	}
	ct := n.clusterTimeNow()
	opTime := uint64(0)
	if s != nil {
		opTime = s.opTime.Load()
	}
	if opTime == 0 {
		opTime = uint64(n.lastOpTS())
	}
	if opTime > ct {
		// A snapshot read's operationTime (the all-durable point) can be ahead of the newest
		// entry the writer has noted committed: the cluster time must cover it, or a causally
		// consistent client's next afterClusterTime would be "greater than the current
		// clusterTime" (InvalidOptions).
		n.State.Clock.AdvanceCluster(optime.Timestamp(opTime))
		ct = uint64(n.State.Clock.ClusterTime())
	}
	sig, ok := n.State.Clock.SignatureFor(optime.Timestamp(ct), p)
	if !ok {
		return reply
	}
	out := make([]byte, 0, len(reply)+96)
	out = append(out, reply[:len(reply)-1]...)
	out = vclock.AppendSignedClusterTime(out, optime.Timestamp(ct), sig)
	out = bsoncore.AppendTimestampElement(out, "operationTime", uint32(opTime>>32), uint32(opTime))
	if s != nil && s.member {
		t := n.State.Clock.Time()
		out = vclock.AppendMemberGossip(out, t)
	}
	out = append(out, 0)
	bsoncore.UpdateLength(out, 0, int32(len(out)))
	return out
}

// coordMajority is {w: "majority"} for the coordinator.
func coordMajority() coord.WriteConcern { return coord.WriteConcern{Majority: true} }

// zeroTSCounter is a node's increment for FillZeroTimestamp (an operation.DB decoration:
// the insert paths that need it hold the operation context, not the server's State).
var zeroTSCounter = operation.NewDecoration(func(*operation.DB) *atomic.Uint32 { return new(atomic.Uint32) })

// FillZeroTimestamp is the value a top-level Timestamp(0, 0) of a document inserted on db's
// node takes: the current second and an increment unique on the node, standing in for the
// cluster-time tick MongoDB's LogicalClock reserves for it (unique per process there; each
// node here has its own counter, as each in-process server has its own clock).
func FillZeroTimestamp(db *operation.DB) (t, i uint32) {
	return uint32(time.Now().Unix()), zeroTSCounter.Get(db).Add(1)
}
