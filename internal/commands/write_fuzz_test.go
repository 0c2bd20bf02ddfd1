package commands_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/wire"
)

// FuzzDispatchOpMsg feeds OP_MSG bodies to an in-process server with storage over a loopback
// connection. Mode byte 0 sends the remaining bytes as the body verbatim (the seeds are valid
// insert/update/delete/findAndModify/find commands, so byte-level mutations explore wrong
// types and lengths); mode 1 builds a structurally valid command from the bytes (random field
// names and BSON values of every type under the write commands' fields). The server must
// answer every message or close the connection (never panic, never hang).
func FuzzDispatchOpMsg(f *testing.F) {
	seeds := []bson.D{
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1, 2}}}}}, {Key: "$db", Value: "test"}},
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 1}}}}, {Key: "ordered", Value: false}, {Key: "$db", Value: "test"}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a.$", Value: 5}}}}}, {Key: "upsert", Value: true}}}}, {Key: "$db", Value: "test"}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "a.$[x]", Value: 1}}}}}, {Key: "multi", Value: true}, {Key: "arrayFilters", Value: bson.A{bson.D{{Key: "x", Value: bson.D{{Key: "$gt", Value: 0}}}}}}}}}, {Key: "$db", Value: "test"}},
		{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 1}}}}}, {Key: "limit", Value: 0}}}}, {Key: "$db", Value: "test"}},
		{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{}}, {Key: "sort", Value: bson.D{{Key: "a", Value: -1}}}, {Key: "update", Value: bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: 3}}}}}, {Key: "new", Value: true}, {Key: "fields", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "$db", Value: "test"}},
		{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "remove", Value: true}, {Key: "$db", Value: "test"}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}}}, {Key: "sort", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "limit", Value: 2}, {Key: "$db", Value: "test"}},
	}
	for _, s := range seeds {
		raw, err := bson.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte{0}, raw...))
	}
	f.Add([]byte{1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 2, 0x10, 0x03, 0x04, 0xff, 0x7f, 0x11, 0x22})
	f.Add([]byte{1, 3, 0x04, 0x03, 0x0a, 0x02, 0x33, 0x44})

	srv, _ := writeTestServer(f)
	addr := fmt.Sprintf("127.0.0.1:%d", srv.Port())
	var conn net.Conn
	var reader *wire.Reader
	var reqID int32
	dial := func(t *testing.T) {
		if conn != nil {
			_ = conn.Close()
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conn, reader = c, wire.NewReader(c)
	}
	f.Cleanup(func() {
		if conn != nil {
			_ = conn.Close()
		}
	})

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		var body []byte
		if data[0] == 0 {
			body = data[1:]
		} else {
			body = writeFuzzCommand(data[1:])
		}
		if conn == nil {
			dial(t)
		}
		reqID++
		msg := wire.AppendMsg(nil, reqID, 0, 0, body)
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := conn.Write(msg); err != nil {
			dial(t) // the server closed the previous connection after a bad frame
			if _, err := conn.Write(msg); err != nil {
				t.Fatalf("write: %v", err)
			}
		}
		var m wire.Message
		err := reader.ReadMessage(&m)
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("server did not answer within 20 s (hang) for body %x", body)
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed):
			conn = nil // closed a malformed message's connection: allowed
		default:
			conn = nil
		}
		// The server must still be alive and answering.
		if conn == nil {
			dial(t)
			reqID++
			ping, _ := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := conn.Write(wire.AppendMsg(nil, reqID, 0, 0, ping)); err != nil {
				t.Fatalf("server gone: %v", err)
			}
			if err := reader.ReadMessage(&m); err != nil {
				t.Fatalf("server does not answer ping: %v", err)
			}
		}
	})
}

// writeFuzzGen turns fuzz bytes into choices.
type writeFuzzGen struct {
	b []byte
}

func (g *writeFuzzGen) next() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

var writeFuzzNames = []string{"a", "b", "_id", "a.b", "a.$", "a.$[]", "a.$[x]", "$set", "$inc", "$push", "$each",
	"$gt", "$in", "$elemMatch", "$or", "x", "0", "1", "", "$", "$expr", "$size", "$unset", "$rename", "$setOnInsert",
	"$pull", "$addToSet", "$slice", "$sort", "$position", "q", "u", "limit", "multi", "upsert", "arrayFilters",
	"hint", "collation", "new", "remove", "fields", "sort", "query", "update", "$natural", "$meta", "$type", "c"}

// value appends a random BSON value of any type as element key (depth-bounded).
func (g *writeFuzzGen) value(b []byte, key string, depth int) []byte {
	switch t := g.next() % 14; {
	case t == 0 || (depth > 4 && t < 4):
		return bsoncore.AppendInt32Element(b, key, int32(int8(g.next())))
	case t == 1:
		idx, b2 := bsoncore.AppendDocumentElementStart(b, key)
		return g.fill(b2, idx, false, depth+1)
	case t == 2:
		idx, b2 := bsoncore.AppendArrayElementStart(b, key)
		return g.fill(b2, idx, true, depth+1)
	case t == 3:
		return bsoncore.AppendStringElement(b, key, writeFuzzNames[int(g.next())%len(writeFuzzNames)])
	case t == 4:
		return bsoncore.AppendDoubleElement(b, key, float64(int8(g.next()))/2)
	case t == 5:
		return bsoncore.AppendInt64Element(b, key, int64(g.next())<<56)
	case t == 6:
		return bsoncore.AppendBooleanElement(b, key, g.next()&1 == 1)
	case t == 7:
		return bsoncore.AppendNullElement(b, key)
	case t == 8:
		return bsoncore.AppendRegexElement(b, key, "^a", "i")
	case t == 9:
		return bsoncore.AppendUndefinedElement(b, key)
	case t == 10:
		return bsoncore.AppendTimestampElement(b, key, 0, 0)
	case t == 11:
		return bsoncore.AppendMinKeyElement(b, key)
	case t == 12:
		return bsoncore.AppendDateTimeElement(b, key, int64(int8(g.next()))*1000)
	default:
		return bsoncore.AppendDecimal128Element(b, key, 0x3040000000000000, uint64(g.next()))
	}
}

func (g *writeFuzzGen) fill(b []byte, idx int32, array bool, depth int) []byte {
	n := int(g.next() % 4)
	for i := 0; i < n; i++ {
		key := writeFuzzNames[int(g.next())%len(writeFuzzNames)]
		if array {
			key = fmt.Sprint(i)
		}
		b = g.value(b, key, depth)
	}
	if array {
		b, _ = bsoncore.AppendArrayEnd(b, idx)
	} else {
		b, _ = bsoncore.AppendDocumentEnd(b, idx)
	}
	return b
}

// writeFuzzCommand builds an insert/update/delete/findAndModify/find with random contents.
func writeFuzzCommand(data []byte) []byte {
	g := &writeFuzzGen{b: data}
	cmds := []struct{ name, arr string }{{"insert", "documents"}, {"update", "updates"}, {"delete", "deletes"}, {"findAndModify", ""}, {"find", ""}}
	c := cmds[int(g.next())%len(cmds)]
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendStringElement(b, c.name, "c")
	if c.arr != "" {
		ai, b2 := bsoncore.AppendArrayElementStart(b, c.arr)
		n := 1 + int(g.next()%3)
		for i := 0; i < n; i++ {
			di, b3 := bsoncore.AppendDocumentElementStart(b2, fmt.Sprint(i))
			b2 = g.fill(b3, di, false, 1)
		}
		b, _ = bsoncore.AppendArrayEnd(b2, ai)
	}
	extra := int(g.next() % 4)
	for i := 0; i < extra; i++ {
		b = g.value(b, writeFuzzNames[int(g.next())%len(writeFuzzNames)], 1)
	}
	b = bsoncore.AppendStringElement(b, "$db", "test")
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}
