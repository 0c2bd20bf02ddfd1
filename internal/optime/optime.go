// Package optime holds the two positions in a replica set's history that every layer shares:
// Timestamp, MongoDB's BSON timestamp (seconds and an increment), which storage uses as the
// commit and read timestamp of its multi-version data, and OpTime, an oplog entry's timestamp
// with the term of the primary that wrote it (spec: replication.md, "OpTime"; MongoDB's
// bson/timestamp.h and db/repl/optime.h).
//
// They are plain values with no IO, so the pure replication core (repl/topology) and its
// deterministic simulation (repl/sim) use the same types as storage and the oplog, and no layer
// converts between copies.
package optime

import (
	"cmp"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Timestamp is a MongoDB Timestamp: seconds in the high 32 bits, an increment in the low 32,
// so the integer order is the (seconds, increment) order and storage can use it as a key
// suffix and do arithmetic on it (the next slot is ts+1). Zero is the null timestamp ("none").
type Timestamp uint64

// MakeTimestamp builds a Timestamp from its two halves.
func MakeTimestamp(secs, inc uint32) Timestamp { return Timestamp(uint64(secs)<<32 | uint64(inc)) }

// Secs returns the seconds half of t.
func (t Timestamp) Secs() uint32 { return uint32(t >> 32) }

// Inc returns the increment half of t.
func (t Timestamp) Inc() uint32 { return uint32(t) }

// IsNull reports whether t is the null timestamp.
func (t Timestamp) IsNull() bool { return t == 0 }

// Compare orders timestamps by seconds then increment: -1, 0 or +1.
func (t Timestamp) Compare(o Timestamp) int { return cmp.Compare(t, o) }

func (t Timestamp) String() string { return fmt.Sprintf("Timestamp(%d, %d)", t.Secs(), t.Inc()) }

// MaxTimestamp is larger than every timestamp a commit can carry.
const MaxTimestamp = Timestamp(^uint64(0))

// UninitializedTerm is the term of entries written before the first election (and of a null
// prevOpTime), as MongoDB's OpTime::kUninitializedTerm.
const UninitializedTerm int64 = -1

// OpTime identifies an oplog entry: its timestamp and the term of the primary that wrote it.
// OpTimes compare by term first, then timestamp (MongoDB's OpTime::operator<), which is what
// makes "more up to date" well defined across divergent branches of history.
type OpTime struct {
	TS   Timestamp
	Term int64
}

// Compare returns -1, 0 or +1.
func (o OpTime) Compare(p OpTime) int {
	if c := cmp.Compare(o.Term, p.Term); c != 0 {
		return c
	}
	return o.TS.Compare(p.TS)
}

// Less reports o < p.
func (o OpTime) Less(p OpTime) bool { return o.Compare(p) < 0 }

// IsNull reports the null OpTime (no entry): a null timestamp, whatever the term, as MongoDB's
// OpTime::isNull. The null prevOpTime of a chain's first entry is {ts: 0, t: -1}.
func (o OpTime) IsNull() bool { return o.TS.IsNull() }

// String is compact ({secs|inc tTerm}) because the topology's golden traces print OpTimes.
func (o OpTime) String() string {
	return fmt.Sprintf("{%d|%d t%d}", o.TS.Secs(), o.TS.Inc(), o.Term)
}

// Max returns the larger of a and b.
func Max(a, b OpTime) OpTime {
	if a.Less(b) {
		return b
	}
	return a
}

// Min returns the smaller of a and b.
func Min(a, b OpTime) OpTime {
	if b.Less(a) {
		return b
	}
	return a
}

// Append appends o's fields, ts (BSON timestamp) and t (int64), to a document being built:
// MongoDB's OpTime BSON is {ts: Timestamp, t: NumberLong}.
func (o OpTime) Append(b *bsoncore.DocumentBuilder) *bsoncore.DocumentBuilder {
	return b.AppendTimestamp("ts", o.TS.Secs(), o.TS.Inc()).AppendInt64("t", o.Term)
}

// Document returns o as the document {ts, t}.
func (o OpTime) Document() bsoncore.Document { return o.Append(bsoncore.NewDocumentBuilder()).Build() }

// AppendElement appends o as the embedded document {ts, t} under key.
func (o OpTime) AppendElement(dst []byte, key string) []byte {
	idx, dst := bsoncore.AppendDocumentElementStart(dst, key)
	dst = bsoncore.AppendTimestampElement(dst, "ts", o.TS.Secs(), o.TS.Inc())
	dst = bsoncore.AppendInt64Element(dst, "t", o.Term)
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// Lookup reads the OpTime document {ts, t} under key of d (config.transactions'
// lastWriteOpTime, an oplog entry's prevOpTime...): false when it is missing or has no
// timestamp ts; a missing term is 0.
func Lookup(d bsoncore.Document, key string) (OpTime, bool) {
	od, ok := d.Lookup(key).DocumentOK()
	if !ok {
		return OpTime{}, false
	}
	secs, inc, ok := od.Lookup("ts").TimestampOK()
	if !ok {
		return OpTime{}, false
	}
	term, _ := od.Lookup("t").AsInt64OK()
	return OpTime{TS: MakeTimestamp(secs, inc), Term: term}, true
}
