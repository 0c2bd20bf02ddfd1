package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// fakeServer speaks just enough of the protocol, through this package's Reader and Writer,
// for the official Go driver to connect, ping and insert. It records what arrived, so the
// test can check the driver's real traffic (legacy OP_QUERY handshake, compression,
// document sequences, moreToCome) went through every path.
type fakeServer struct {
	ln net.Listener
	wg sync.WaitGroup

	mu          sync.Mutex
	conns       []net.Conn
	opQueries   int
	compressed  map[Compressor]int
	sequences   int
	moreToCome  int
	inserted    int
	replyErrors []error
}

func startFakeServer(t *testing.T) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{ln: ln, compressed: map[Compressor]int{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

// close stops the listener and every connection and waits for their goroutines.
func (s *fakeServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *fakeServer) serve(c net.Conn) {
	r, w := NewReader(c), NewWriter(c)
	var m Message
	var negotiated []Compressor
	for reqID := int32(1); ; reqID++ {
		if err := r.ReadMessage(&m); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, ErrFraming) {
				s.record(func() { s.replyErrors = append(s.replyErrors, err) })
			}
			return
		}
		var cmd bsoncore.Document
		var err error
		switch m.OpCode {
		case OpQuery:
			s.record(func() { s.opQueries++ })
			cmd, err = m.Query.Command()
		case OpMsg:
			cmd, err = m.Msg.Command()
		}
		if m.Compressor != CompressorNone {
			s.record(func() { s.compressed[m.Compressor]++ })
		}
		if len(m.Msg.Sequences) > 0 {
			s.record(func() { s.sequences++ })
		}
		var reply bsoncore.Document
		if err != nil {
			reply = bsoncore.NewDocumentBuilder().AppendDouble("ok", 0).AppendString("errmsg", err.Error()).Build()
		} else {
			reply = s.handle(cmd, &negotiated)
		}
		if m.OpCode == OpMsg && m.Msg.MoreToCome() {
			s.record(func() { s.moreToCome++ })
			continue
		}
		if m.OpCode == OpQuery {
			err = w.WriteReply(reqID, m.Header.RequestID, 0, reply, m.Compressor)
		} else {
			err = w.WriteMsg(reqID, m.Header.RequestID, 0, reply, m.Compressor)
		}
		if err != nil {
			return
		}
	}
}

func (s *fakeServer) record(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func (s *fakeServer) handle(cmd bsoncore.Document, negotiated *[]Compressor) bsoncore.Document {
	name := cmd.Index(0).Key()
	b := bsoncore.NewDocumentBuilder()
	switch name {
	case "hello", "isMaster", "ismaster":
		if cs, err := NegotiateHello(cmd, DefaultCompressors); err == nil && len(cs) > 0 {
			*negotiated = cs
		}
		b.AppendBoolean("helloOk", true).AppendBoolean("isWritablePrimary", true).AppendBoolean("ismaster", true).
			AppendInt32("maxBsonObjectSize", MaxBSONObjectSize).AppendInt32("maxMessageSizeBytes", MaxMessageSizeBytes).
			AppendInt32("maxWriteBatchSize", MaxWriteBatchSize).AppendDateTime("localTime", time.Now().UnixMilli()).
			AppendInt32("logicalSessionTimeoutMinutes", 30).AppendInt32("connectionId", 1).
			AppendInt32("minWireVersion", 0).AppendInt32("maxWireVersion", 21).AppendBoolean("readOnly", false)
		if len(*negotiated) > 0 {
			arr := bsoncore.NewArrayBuilder()
			for _, n := range CompressorNames(*negotiated) {
				arr.AppendString(n)
			}
			b.AppendArray("compression", arr.Build())
		}
	case "insert":
		docs, _ := cmd.Lookup("documents").Array().Values()
		s.record(func() { s.inserted += len(docs) })
		b.AppendInt32("n", int32(len(docs)))
	case "ping", "endSessions":
	default:
		return b.AppendDouble("ok", 0).AppendString("errmsg", "no such command: "+name).AppendInt32("code", 59).Build()
	}
	return b.AppendDouble("ok", 1).Build()
}

// TestDriverEndToEnd runs the official Go driver against the fake server for each
// compressor.
func TestDriverEndToEnd(t *testing.T) {
	for _, comp := range []string{"snappy", "zlib", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			s := startFakeServer(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			uri := fmt.Sprintf("mongodb://%s/?directConnection=true&compressors=%s", s.ln.Addr(), comp)
			client, err := mongo.Connect(options.Client().ApplyURI(uri).SetRetryWrites(false))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Disconnect(context.Background())
			if err := client.Ping(ctx, nil); err != nil {
				t.Fatal(err)
			}
			docs := make([]any, 500)
			for i := range docs {
				docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: "some repetitive text some repetitive text"}}
			}
			coll := client.Database("test").Collection("c")
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				t.Fatal(err)
			}
			w0 := client.Database("test").Collection("c", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
			if _, err := w0.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
				t.Fatal(err)
			}
			// A second acknowledged round trip after the w:0 write proves the stream stayed in
			// sync and that the unacknowledged insert was read first.
			if err := client.Ping(ctx, nil); err != nil {
				t.Fatal(err)
			}
			want, _ := CompressorByName(comp)
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Logf("opQueries %d compressed %v sequences %d moreToCome %d inserted %d",
				s.opQueries, s.compressed, s.sequences, s.moreToCome, s.inserted)
			if s.opQueries == 0 || s.compressed[want] == 0 || s.sequences == 0 || s.moreToCome != 1 || s.inserted != 501 || len(s.replyErrors) != 0 {
				t.Fatalf("opQueries %d compressed %v sequences %d moreToCome %d inserted %d errors %v",
					s.opQueries, s.compressed, s.sequences, s.moreToCome, s.inserted, s.replyErrors)
			}
		})
	}
}
