package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/commands"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
	"humongo/internal/wire"
)

// startServer runs an in-process server on an ephemeral port with test commands enabled and
// shuts it down (checking for leaked goroutines) when the test ends.
func startServer(t *testing.T) *Server {
	t.Helper()
	params := service.NewParams(commands.DefaultParamSpecs())
	if err := params.SetString("enableTestCommands", "1"); err != nil {
		t.Fatal(err)
	}
	s, err := New(mongodConfig(params, nil))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		failCommand.Disable()
		if t.Failed() {
			t.Log(logText(s))
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// mongodConfig is a storage-less humongod's server configuration: mongod's parameters
// (params, when nil), registry (reg, when nil) and role.
func mongodConfig(params *service.Params, reg *service.Registry) Config {
	if params == nil {
		params = service.NewParams(commands.DefaultParamSpecs())
	}
	if reg == nil {
		reg = commands.NewRegistry()
	}
	st := commands.NewState(nil, service.Config{Params: params})
	return Config{Port: 0, State: st, Registry: reg, Role: commands.NewRole(st)}
}

func connect(t *testing.T, s *Server, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	o := options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetServerSelectionTimeout(30 * time.Second).SetRetryReads(false).SetRetryWrites(false).
		// A short heartbeat bounds the awaitable hello, so after a network error (closeConnection)
		// the monitor rediscovers the server quickly, as driver spec tests configure it.
		SetHeartbeatInterval(500 * time.Millisecond)
	for _, x := range opts {
		o = options.MergeClientOptions(o, x)
	}
	cl, err := mongo.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	return cl
}

func runCmd(t *testing.T, cl *mongo.Client, db string, cmd bson.D) (bson.Raw, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Database(db).RunCommand(ctx, cmd).Raw()
}

func mustRun(t *testing.T, cl *mongo.Client, db string, cmd bson.D) bson.Raw {
	t.Helper()
	r, err := runCmd(t, cl, db, cmd)
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return r
}

func wantCode(t *testing.T, err error, code mongoerr.Code) mongo.CommandError {
	t.Helper()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("want command error %d, got %v", code, err)
	}
	if ce.Code != int32(code) || ce.Name != code.Name() {
		t.Fatalf("want code %d %s, got %d %s: %s", code, code.Name(), ce.Code, ce.Name, ce.Message)
	}
	return ce
}

func TestHelloPingBuildInfo(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)

	r := mustRun(t, cl, "admin", bson.D{{Key: "hello", Value: 1}})
	if !r.Lookup("isWritablePrimary").Boolean() {
		t.Errorf("isWritablePrimary: %v", r)
	}
	for key, want := range map[string]int64{
		"maxBsonObjectSize": 16777216, "maxMessageSizeBytes": 48000000, "maxWriteBatchSize": 100000,
		"logicalSessionTimeoutMinutes": 30, "minWireVersion": 0, "maxWireVersion": 21,
	} {
		if got := r.Lookup(key).AsInt64(); got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
	if tv := r.Lookup("topologyVersion").Document(); tv.Lookup("processId").ObjectID() != s.State().ProcessID {
		t.Errorf("topologyVersion: %v", tv)
	}
	if r.Lookup("connectionId").AsInt64() <= 0 || r.Lookup("readOnly").Boolean() {
		t.Errorf("hello: %v", r)
	}
	// Legacy name answers with the legacy field; helloOk is echoed when asked.
	r = mustRun(t, cl, "admin", bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}})
	if !r.Lookup("ismaster").Boolean() || !r.Lookup("helloOk").Boolean() {
		t.Errorf("isMaster: %v", r)
	}
	if _, err := r.LookupErr("isWritablePrimary"); err == nil {
		t.Errorf("isMaster must not have isWritablePrimary: %v", r)
	}
	// Client metadata only on the first hello of a connection; the driver sent it already.
	_, err := runCmd(t, cl, "admin", bson.D{{Key: "hello", Value: 1}, {Key: "client", Value: bson.D{
		{Key: "driver", Value: bson.D{{Key: "name", Value: "x"}, {Key: "version", Value: "1"}}},
		{Key: "os", Value: bson.D{{Key: "type", Value: "Linux"}}}}}})
	wantCode(t, err, mongoerr.ClientMetadataCannotBeMutated)

	mustRun(t, cl, "test", bson.D{{Key: "ping", Value: 1}})

	r = mustRun(t, cl, "admin", bson.D{{Key: "buildInfo", Value: 1}})
	if v := r.Lookup("version").StringValue(); !strings.HasPrefix(v, "7.0.") {
		t.Errorf("version %q", v)
	}
	va, _ := r.Lookup("versionArray").Array().Values()
	if len(va) != 4 || va[0].AsInt64() != 7 || r.Lookup("bits").AsInt64() != 64 ||
		r.Lookup("javascriptEngine").StringValue() != "none" || r.Lookup("maxBsonObjectSize").AsInt64() != 16777216 {
		t.Errorf("buildInfo: %v", r)
	}
}

func TestUnknownCommandAndDB(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	_, err := runCmd(t, cl, "test", bson.D{{Key: "noSuchThing", Value: 1}})
	ce := wantCode(t, err, mongoerr.CommandNotFound)
	if ce.Message != "no such command: 'noSuchThing'" {
		t.Errorf("errmsg %q", ce.Message)
	}
	// Command names are case-sensitive.
	_, err = runCmd(t, cl, "test", bson.D{{Key: "PING", Value: 1}})
	wantCode(t, err, mongoerr.CommandNotFound)
	_, err = runCmd(t, cl, "test", bson.D{{Key: "getParameter", Value: "*"}})
	wantCode(t, err, mongoerr.Unauthorized)
}

func TestServerStatusOpcounters(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	before := mustRun(t, cl, "admin", bson.D{{Key: "serverStatus", Value: 1}})
	for range 5 {
		mustRun(t, cl, "admin", bson.D{{Key: "ping", Value: 1}})
	}
	after := mustRun(t, cl, "admin", bson.D{{Key: "serverStatus", Value: 1}})
	b := before.Lookup("opcounters", "command").AsInt64()
	a := after.Lookup("opcounters", "command").AsInt64()
	if a-b < 6 { // 5 pings + the first serverStatus
		t.Errorf("opcounters.command %d -> %d", b, a)
	}
	if after.Lookup("connections", "current").AsInt64() < 1 || after.Lookup("connections", "totalCreated").AsInt64() < 1 {
		t.Errorf("connections: %v", after.Lookup("connections"))
	}
	if after.Lookup("network", "numRequests").AsInt64() <= before.Lookup("network", "numRequests").AsInt64() ||
		after.Lookup("network", "bytesIn").AsInt64() == 0 {
		t.Errorf("network: %v", after.Lookup("network"))
	}
	if after.Lookup("process").StringValue() != "humongod" || after.Lookup("mem", "bits").AsInt64() != 64 {
		t.Errorf("serverStatus: %v", after)
	}
	if _, err := after.LookupErr("metrics", "cursor", "open", "total"); err != nil {
		t.Errorf("metrics.cursor: %v", err)
	}
}

func TestParameters(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	r := mustRun(t, cl, "admin", bson.D{{Key: "getParameter", Value: "*"}})
	if r.Lookup("ttlMonitorSleepSecs").AsInt64() != 60 || r.Lookup("cursorTimeoutMillis").AsInt64() != 600000 {
		t.Errorf("getParameter *: %v", r)
	}
	r = mustRun(t, cl, "admin", bson.D{{Key: "getParameter", Value: bson.D{{Key: "showDetails", Value: true}}},
		{Key: "cursorTimeoutMillis", Value: 1}})
	if !r.Lookup("cursorTimeoutMillis", "settableAtRuntime").Boolean() {
		t.Errorf("showDetails: %v", r)
	}
	r = mustRun(t, cl, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "cursorTimeoutMillis", Value: 1000}})
	if r.Lookup("was").AsInt64() != 600000 {
		t.Errorf("was: %v", r)
	}
	r = mustRun(t, cl, "admin", bson.D{{Key: "getParameter", Value: 1}, {Key: "cursorTimeoutMillis", Value: 1}})
	if r.Lookup("cursorTimeoutMillis").AsInt64() != 1000 {
		t.Errorf("after set: %v", r)
	}
	_, err := runCmd(t, cl, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "cursorTimeoutMillis", Value: "abc"}})
	wantCode(t, err, mongoerr.BadValue)
	_, err = runCmd(t, cl, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "noSuchParam", Value: 1}})
	ce := wantCode(t, err, mongoerr.InvalidOptions)
	if !strings.Contains(ce.Message, "attempted to set unrecognized parameter [noSuchParam]") {
		t.Errorf("errmsg %q", ce.Message)
	}
	_, err = runCmd(t, cl, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "enableTestCommands", Value: 0}})
	wantCode(t, err, mongoerr.IllegalOperation)
}

func TestFailCommand(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	// The fail point's count is process-wide and other tests hit it too: count from here.
	before := mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).
		Lookup("count").AsInt64()
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 2}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 91}}}})
	for i := range 2 {
		_, err := runCmd(t, cl, "test", bson.D{{Key: "ping", Value: 1}})
		ce := wantCode(t, err, mongoerr.ShutdownInProgress)
		if ce.Message != "Failing command via 'failCommand' failpoint" {
			t.Errorf("%d: errmsg %q", i, ce.Message)
		}
	}
	mustRun(t, cl, "test", bson.D{{Key: "ping", Value: 1}}) // times exhausted

	// closeConnection: the driver sees a network error, the server keeps serving.
	r := mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "closeConnection", Value: true}}}})
	if r.Lookup("count").AsInt64()-before != 2 {
		t.Errorf("count: %v, %d before", r, before)
	}
	_, err := runCmd(t, cl, "test", bson.D{{Key: "ping", Value: 1}})
	if !mongo.IsNetworkError(err) {
		t.Fatalf("want network error, got %v", err)
	}
	mustRun(t, cl, "test", bson.D{{Key: "ping", Value: 1}})

	// errorLabels and appName filtering.
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 11600},
			{Key: "errorLabels", Value: bson.A{"Foo"}}, {Key: "appName", Value: "other"}}}})
	mustRun(t, cl, "test", bson.D{{Key: "ping", Value: 1}}) // different appName: not failed
	other := connect(t, s, options.Client().SetAppName("other"))
	_, err = runCmd(t, other, "test", bson.D{{Key: "ping", Value: 1}})
	ce := wantCode(t, err, mongoerr.InterruptedAtShutdown)
	if !ce.HasErrorLabel("Foo") {
		t.Errorf("labels: %v", ce.Labels)
	}
	// blockConnection delays without failing.
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true},
			{Key: "blockTimeMS", Value: 200}}}})
	start := time.Now()
	mustRun(t, cl, "test", bson.D{{Key: "ping", Value: 1}})
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("blockConnection: ping took %v", d)
	}
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
	_, err = runCmd(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "noSuchFailPoint"}, {Key: "mode", Value: "off"}})
	wantCode(t, err, mongoerr.FailPointSetFailed)
}

func TestCompressionNegotiated(t *testing.T) {
	s := startServer(t)
	for _, comp := range []string{"zstd", "snappy", "zlib"} {
		t.Run(comp, func(t *testing.T) {
			cl := connect(t, s, options.Client().SetCompressors([]string{comp}))
			r := mustRun(t, cl, "admin", bson.D{{Key: "hello", Value: 1}, {Key: "compression", Value: bson.A{comp}}})
			vals, _ := r.Lookup("compression").Array().Values()
			if len(vals) != 1 || vals[0].StringValue() != comp {
				t.Fatalf("compression: %v", r)
			}
			// Commands after the handshake travel compressed (the driver compresses ping).
			for range 3 {
				mustRun(t, cl, "test", bson.D{{Key: "ping", Value: 1}})
			}
			r = mustRun(t, cl, "admin", bson.D{{Key: "buildInfo", Value: 1}})
			if r.Lookup("ok").AsInt64() != 1 {
				t.Fatal(r)
			}
		})
	}
}

// rawConn is a bare TCP client for frames the driver would never send.
func rawConn(t *testing.T, s *Server) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc
}

func appendOpQuery(requestID int32, ns string, query bsoncore.Document) []byte {
	b := make([]byte, 16, 64+len(query))
	b = binary.LittleEndian.AppendUint32(b, 0) // flags
	b = append(b, ns...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 0)          // skip
	b = binary.LittleEndian.AppendUint32(b, 0xFFFFFFFF) // numberToReturn -1
	b = append(b, query...)
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b)))
	binary.LittleEndian.PutUint32(b[4:], uint32(requestID))
	binary.LittleEndian.PutUint32(b[12:], uint32(wire.OpQuery))
	return b
}

func readFrame(t *testing.T, nc net.Conn) []byte {
	t.Helper()
	hdr := make([]byte, 16)
	if _, err := io.ReadFull(nc, hdr); err != nil {
		t.Fatalf("read header: %v", err)
	}
	n := binary.LittleEndian.Uint32(hdr)
	msg := make([]byte, n)
	copy(msg, hdr)
	if _, err := io.ReadFull(nc, msg[16:]); err != nil {
		t.Fatalf("read body: %v", err)
	}
	return msg
}

func TestOpQueryHandshake(t *testing.T) {
	s := startServer(t)
	nc := rawConn(t, s)
	q := bsoncore.NewDocumentBuilder().AppendInt32("isMaster", 1).AppendBoolean("helloOk", true).Build()
	if _, err := nc.Write(appendOpQuery(7, "admin.$cmd", q)); err != nil {
		t.Fatal(err)
	}
	h, rep, err := wire.ParseReply(readFrame(t, nc))
	if err != nil {
		t.Fatal(err)
	}
	if h.ResponseTo != 7 || h.OpCode != wire.OpReply || rep.NumberReturned != 1 {
		t.Fatalf("reply header %+v %+v", h, rep)
	}
	d := rep.Documents[0]
	if !d.Lookup("ismaster").Boolean() || !d.Lookup("helloOk").Boolean() || d.Lookup("ok").Double() != 1 {
		t.Errorf("reply %v", d)
	}
	// Anything but the handshake is refused over OP_QUERY.
	q = bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).Build()
	if _, err := nc.Write(appendOpQuery(8, "admin.$cmd", q)); err != nil {
		t.Fatal(err)
	}
	_, rep, err = wire.ParseReply(readFrame(t, nc))
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Documents[0].Lookup("code").Int32(); c != int32(mongoerr.UnsupportedOpQueryCommand) {
		t.Errorf("ping over OP_QUERY: %v", rep.Documents[0])
	}
}

func TestMalformedFrameClosesConnection(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	mustRun(t, cl, "admin", bson.D{{Key: "ping", Value: 1}})

	nc := rawConn(t, s)
	bad := make([]byte, 16)
	binary.LittleEndian.PutUint32(bad, 5) // messageLength below the header size
	binary.LittleEndian.PutUint32(bad[12:], uint32(wire.OpMsg))
	if _, err := nc.Write(bad); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF after a malformed frame, got %v", err)
	}
	// An OP_MSG without $db gets an error reply on the same connection.
	nc2 := rawConn(t, s)
	msg := wire.AppendMsg(nil, 3, 0, 0, bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).Build())
	if _, err := nc2.Write(msg); err != nil {
		t.Fatal(err)
	}
	reply := readFrame(t, nc2)
	body := bsoncore.Document(reply[16+4+1:])
	if body.Lookup("code").Int32() != 40571 {
		t.Errorf("no $db: %v", body)
	}
	mustRun(t, cl, "admin", bson.D{{Key: "ping", Value: 1}})
	if !strings.Contains(logText(s), "Error receiving request from client") {
		t.Errorf("malformed frame not logged")
	}
}

func logText(s *Server) string {
	lines, _ := s.State().Log.Global.Lines()
	return strings.Join(lines, "\n")
}

func TestCurrentOpKillOp(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	// Block a ping on the fail point, find it in currentOp, kill it.
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true},
			{Key: "blockTimeMS", Value: 20000}}}})
	errc := make(chan error, 1)
	go func() {
		_, err := runCmd(t, cl, "test", bson.D{{Key: "ping", Value: 1}, {Key: "comment", Value: "victim"}})
		errc <- err
	}()
	var opid int64
	deadline := time.Now().Add(5 * time.Second)
	for opid == 0 && time.Now().Before(deadline) {
		r := mustRun(t, cl, "admin", bson.D{{Key: "currentOp", Value: 1}, {Key: "command.comment", Value: "victim"}})
		ops, _ := r.Lookup("inprog").Array().Values()
		if len(ops) == 1 {
			op := ops[0].Document()
			opid = op.Lookup("opid").AsInt64()
			if op.Lookup("ns").StringValue() != "test.$cmd" || !op.Lookup("active").Boolean() {
				t.Errorf("op: %v", op)
			}
		}
	}
	if opid == 0 {
		t.Fatal("ping not found in currentOp")
	}
	mustRun(t, cl, "admin", bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: opid}})
	wantCode(t, <-errc, mongoerr.Interrupted)
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
}

func TestSessionsAndMisc(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	r := mustRun(t, cl, "admin", bson.D{{Key: "startSession", Value: 1}})
	if r.Lookup("timeoutMinutes").AsInt64() != 30 {
		t.Errorf("startSession: %v", r)
	}
	sub, id := r.Lookup("id", "id").Binary()
	if sub != 4 || len(id) != 16 {
		t.Fatalf("lsid: %v", r)
	}
	var key lsc.Key
	copy(key.ID[:], id)
	key.UID = lsc.NoUserUID
	if !s.State().Sessions.Has(key) {
		t.Errorf("startSession's session is not in the cache")
	}
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: id}}}
	mustRun(t, cl, "admin", bson.D{{Key: "refreshSessions", Value: bson.A{lsid}}})
	mustRun(t, cl, "admin", bson.D{{Key: "endSessions", Value: bson.A{lsid}}})
	// endSessions marks the session; the cache's next refresh removes it.
	if !s.State().Sessions.Ending(key) {
		t.Errorf("endSessions did not mark the session as ending")
	}
	_, err := runCmd(t, cl, "admin", bson.D{{Key: "endSessions", Value: bson.A{bson.D{{Key: "id", Value: "nope"}}}}})
	wantCode(t, err, mongoerr.TypeMismatch)
	mustRun(t, cl, "admin", bson.D{{Key: "killAllSessions", Value: bson.A{}}})

	r = mustRun(t, cl, "admin", bson.D{{Key: "connectionStatus", Value: 1}})
	if _, err := r.LookupErr("authInfo", "authenticatedUsers"); err != nil {
		t.Errorf("connectionStatus: %v", r)
	}
	r = mustRun(t, cl, "admin", bson.D{{Key: "whatsmyuri", Value: 1}})
	if !strings.HasPrefix(r.Lookup("you").StringValue(), "127.0.0.1:") {
		t.Errorf("whatsmyuri: %v", r)
	}
	r = mustRun(t, cl, "admin", bson.D{{Key: "getLog", Value: "*"}})
	if names, _ := r.Lookup("names").Array().Values(); len(names) != 2 {
		t.Errorf("getLog *: %v", r)
	}
	r = mustRun(t, cl, "admin", bson.D{{Key: "getLog", Value: "global"}})
	if !strings.Contains(r.Lookup("log").String(), "Waiting for connections") {
		t.Errorf("getLog global: %v", r)
	}
	r = mustRun(t, cl, "admin", bson.D{{Key: "listCommands", Value: 1}})
	if _, err := r.LookupErr("commands", "hello", "help"); err != nil {
		t.Errorf("listCommands: %v", err)
	}
	mustRun(t, cl, "admin", bson.D{{Key: "hostInfo", Value: 1}})
	mustRun(t, cl, "admin", bson.D{{Key: "getCmdLineOpts", Value: 1}})
	_, err = runCmd(t, cl, "admin", bson.D{{Key: "ping", Value: 1}, {Key: "maxTimeMS", Value: -1}})
	wantCode(t, err, mongoerr.BadValue)
}

func TestShutdownCommandAndNoLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	closed := make(chan struct{})
	cfg := mongodConfig(nil, nil)
	cfg.Closers = []Closer{closerFunc(func() error { close(closed); return nil })}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	// A generous selection timeout: under a loaded CI machine the first hello can take
	// more than 2 s (it failed so once); the test is about the shutdown and leaks.
	o := options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetServerSelectionTimeout(15 * time.Second)
	cl, err := mongo.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Database("test").RunCommand(ctx, bson.D{{Key: "shutdown", Value: 1}}).Raw()
	wantCode(t, err, mongoerr.Unauthorized) // admin only
	err = cl.Database("admin").RunCommand(ctx, bson.D{{Key: "shutdown", Value: 1}}).Err()
	if err == nil || !mongo.IsNetworkError(err) {
		t.Errorf("shutdown reply: want a closed connection, got %v", err)
	}
	select {
	case <-s.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown did not finish")
	}
	select {
	case <-closed:
	default:
		t.Error("storage closer not closed")
	}
	_ = cl.Disconnect(ctx)
	// Every goroutine of the server and the driver must be gone.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d before, %d after\n%s", base, n, buf[:runtime.Stack(buf, true)])
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func TestCompressedRequestGetsCompressedReply(t *testing.T) {
	s := startServer(t)
	nc := rawConn(t, s)
	msg := wire.AppendMsg(nil, 11, 0, 0, bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).AppendString("$db", "admin").Build())
	for _, c := range []wire.Compressor{wire.CompressorZstd, wire.CompressorSnappy} {
		out, err := wire.AppendCompressed(nil, msg, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(out); err != nil {
			t.Fatal(err)
		}
		reply := readFrame(t, nc)
		if op := wire.OpCode(binary.LittleEndian.Uint32(reply[12:])); op != wire.OpCompressed {
			t.Fatalf("%v: reply opcode %v", c, op)
		}
		var m wire.Message
		if err := m.Parse(reply); err != nil {
			t.Fatal(err)
		}
		if m.Compressor != c || m.Msg.Body.Lookup("ok").Double() != 1 {
			t.Errorf("%v: reply %v via %v", c, m.Msg.Body, m.Compressor)
		}
	}
}

func TestExhaustHelloStreams(t *testing.T) {
	s := startServer(t)
	nc := rawConn(t, s)
	tv := bsoncore.NewDocumentBuilder().AppendObjectID("processId", s.State().ProcessID).AppendInt64("counter", 0).Build()
	hello := bsoncore.NewDocumentBuilder().AppendInt32("hello", 1).AppendDocument("topologyVersion", tv).
		AppendInt64("maxAwaitTimeMS", 50).AppendString("$db", "admin").Build()
	if _, err := nc.Write(wire.AppendMsg(nil, 21, 0, wire.FlagExhaustAllowed, hello)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	prev := int32(21)
	for i := range 3 {
		reply := readFrame(t, nc)
		var m wire.Message
		if err := m.Parse(reply); err != nil {
			t.Fatal(err)
		}
		if m.Header.ResponseTo != prev || !m.Msg.MoreToCome() || !m.Msg.Body.Lookup("isWritablePrimary").Boolean() {
			t.Fatalf("reply %d: responseTo %d (want %d), flags %x, %v", i, m.Header.ResponseTo, prev, m.Msg.Flags, m.Msg.Body)
		}
		prev = m.Header.RequestID
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("3 awaitable replies in %v: the server did not wait maxAwaitTimeMS", d)
	}
}
