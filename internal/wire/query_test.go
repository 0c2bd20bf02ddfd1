package wire

import (
	"encoding/binary"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"humongo/internal/mongoerr"
)

// driverQuery builds an OP_QUERY the way the Go driver's legacy handshake does.
func driverQuery(reqID int32, flags wiremessage.QueryFlag, ns string, query, fields bsoncore.Document) []byte {
	idx, b := wiremessage.AppendHeaderStart(nil, reqID, 0, wiremessage.OpQuery)
	b = wiremessage.AppendQueryFlags(b, flags)
	b = wiremessage.AppendQueryFullCollectionName(b, ns)
	b = wiremessage.AppendQueryNumberToSkip(b, 0)
	b = wiremessage.AppendQueryNumberToReturn(b, -1)
	b = append(b, query...)
	b = append(b, fields...)
	return bsoncore.UpdateLength(b, idx, int32(len(b[idx:])))
}

func TestQueryCommand(t *testing.T) {
	rp := bson.D{{Key: "mode", Value: "primaryPreferred"}}
	cases := []struct {
		name  string
		flags wiremessage.QueryFlag
		ns    string
		query bson.D
		want  bson.D
	}{
		{"plain hello", 0, "admin.$cmd",
			bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}},
			bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}, {Key: "$db", Value: "admin"}}},
		{"$query wrapper with readPreference", 0, "admin.$cmd",
			bson.D{{Key: "$query", Value: bson.D{{Key: "hello", Value: 1}}}, {Key: "$readPreference", Value: rp}},
			bson.D{{Key: "hello", Value: 1}, {Key: "$readPreference", Value: rp}, {Key: "$db", Value: "admin"}}},
		{"query wrapper", 0, "test.$cmd",
			bson.D{{Key: "query", Value: bson.D{{Key: "ping", Value: 1}}}},
			bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "test"}}},
		{"secondaryOk flag", wiremessage.SecondaryOK, "admin.$cmd",
			bson.D{{Key: "hello", Value: 1}},
			bson.D{{Key: "hello", Value: 1}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}, {Key: "$db", Value: "admin"}}},
		{"inline readPreference wins over flag", wiremessage.SecondaryOK, "admin.$cmd",
			bson.D{{Key: "hello", Value: 1}, {Key: "$readPreference", Value: rp}},
			bson.D{{Key: "hello", Value: 1}, {Key: "$readPreference", Value: rp}, {Key: "$db", Value: "admin"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fields := mustDoc(t, bson.D{{Key: "x", Value: 1}})
			m, err := parse(driverQuery(11, c.flags, c.ns, mustDoc(t, c.query), fields))
			if err != nil {
				t.Fatal(err)
			}
			q := &m.Query
			if m.OpCode != OpQuery || q.FullCollectionName != c.ns || q.NumberToReturn != -1 || q.Flags != int32(c.flags) || !q.IsCommand() {
				t.Fatalf("parsed %+v", q)
			}
			equalDocs(t, "returnFieldsSelector", q.ReturnFieldsSelector, fields)
			got, err := q.Command()
			if err != nil {
				t.Fatal(err)
			}
			equalDocs(t, "command", got, mustDoc(t, c.want))
		})
	}
}

func TestQueryErrors(t *testing.T) {
	hello := mustDoc(t, bson.D{{Key: "hello", Value: 1}})
	m, err := parse(driverQuery(1, 0, "test.coll", hello, nil))
	if err != nil {
		t.Fatal(err)
	}
	if m.Query.ReturnFieldsSelector != nil || m.Query.IsCommand() {
		t.Fatal("a collection namespace is not a command")
	}
	_, err = m.Query.Command()
	wantCode(t, err, mongoerr.UnsupportedOpQueryCommand)

	m, _ = parse(driverQuery(1, 0, "admin.$cmd", mustDoc(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "x"}}), nil))
	_, err = m.Query.Command()
	wantCode(t, err, mongoerr.InvalidOptions)

	m, _ = parse(driverQuery(1, 0, "admin.$cmd", mustDoc(t, bson.D{{Key: "$query", Value: 1}}), nil))
	_, err = m.Query.Command()
	wantCode(t, err, mongoerr.TypeMismatch)

	wantCode(t, UnsupportedOpQuery("find"), mongoerr.UnsupportedOpQueryCommand)

	// Byte-level damage.
	good := driverQuery(1, 0, "admin.$cmd", hello, nil)
	trailing := append(append([]byte{}, good...), 1, 2, 3)
	binary.LittleEndian.PutUint32(trailing, uint32(len(trailing)))
	noNUL := driverQuery(1, 0, "admin.$cmd", nil, nil)[:HeaderLen+4+10]
	binary.LittleEndian.PutUint32(noNUL, uint32(len(noNUL)))
	for name, b := range map[string][]byte{"trailing bytes": trailing, "unterminated namespace": noNUL} {
		if _, err := parse(b); err == nil || isFraming(err) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestReplyRoundTrip(t *testing.T) {
	doc := mustDoc(t, bson.D{{Key: "ok", Value: 1.0}, {Key: "isWritablePrimary", Value: true}})
	b := AppendReply(nil, 3, 11, ReplyAwaitCapable, doc)

	// Our parser.
	h, r, err := ParseReply(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.RequestID != 3 || h.ResponseTo != 11 || h.OpCode != OpReply || r.ResponseFlags != ReplyAwaitCapable || r.CursorID != 0 || r.StartingFrom != 0 || r.NumberReturned != 1 || len(r.Documents) != 1 {
		t.Fatalf("%+v %+v", h, r)
	}
	equalDocs(t, "reply doc", r.Documents[0], doc)

	// The driver's readers, as its legacy handshake uses them.
	_, _, respTo, op, rem, ok := wiremessage.ReadHeader(b)
	if !ok || respTo != 11 || op != wiremessage.OpReply {
		t.Fatal("driver header")
	}
	flags, rem, _ := wiremessage.ReadReplyFlags(rem)
	cur, rem, _ := wiremessage.ReadReplyCursorID(rem)
	sf, rem, _ := wiremessage.ReadReplyStartingFrom(rem)
	nr, rem, _ := wiremessage.ReadReplyNumberReturned(rem)
	docs, rem, ok := wiremessage.ReadReplyDocuments(rem)
	if flags != wiremessage.AwaitCapable || cur != 0 || sf != 0 || nr != 1 || !ok || len(docs) != 1 || len(rem) != 0 {
		t.Fatal("driver cannot read our OP_REPLY")
	}
	equalDocs(t, "driver reply doc", docs[0], doc)

	// A reply is not a request.
	if _, err := parse(b); mongoerr.CodeOf(err) != mongoerr.ProtocolError || isFraming(err) {
		t.Fatalf("OP_REPLY sent to a server: %v", err)
	}
}
