package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/certs"
	"humongo/internal/wire"
)

// testTLS is a local CA's files, loaded.
type testTLS struct {
	files  certs.Local
	pool   *x509.CertPool
	server tls.Certificate
	client tls.Certificate
}

func newTestTLS(t *testing.T) *testTLS {
	t.Helper()
	f, err := certs.EnsureLocal(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tt := &testTLS{files: f}
	if tt.pool, err = certs.LoadCAPool(f.CA); err != nil {
		t.Fatal(err)
	}
	if tt.server, err = certs.LoadKeyPair(f.Server); err != nil {
		t.Fatal(err)
	}
	if tt.client, err = certs.LoadKeyPair(f.Client); err != nil {
		t.Fatal(err)
	}
	return tt
}

// startTLSServer runs an in-process server in mode, verifying client certificates against
// the CA and requiring one as auth says.
func startTLSServer(t *testing.T, tt *testTLS, mode TLSMode, auth tls.ClientAuthType) *Server {
	t.Helper()
	cfg := mongodConfig(nil, nil)
	cfg.TLS = TLS{Mode: mode, Config: &tls.Config{Certificates: []tls.Certificate{tt.server}, ClientCAs: tt.pool, ClientAuth: auth}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logText(s))
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// ping connects with the driver (TLS when cfg is set) and pings once.
func ping(s *Server, cfg *tls.Config) error { return pingWithin(s, cfg, 10*time.Second) }

// refused is ping for a client the server must refuse: a short server selection timeout, so
// that the refusal does not cost the test the whole default wait.
func refused(s *Server, cfg *tls.Config) bool { return pingWithin(s, cfg, time.Second) != nil }

func pingWithin(s *Server, cfg *tls.Config, selection time.Duration) error {
	o := options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetServerSelectionTimeout(selection).SetConnectTimeout(selection)
	if cfg != nil {
		o.SetTLSConfig(cfg)
	}
	cl, err := mongo.Connect(o)
	if err != nil {
		return err
	}
	defer func() { _ = cl.Disconnect(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
}

func TestRequireTLS(t *testing.T) {
	tt := newTestTLS(t)
	s := startTLSServer(t, tt, TLSRequire, tls.VerifyClientCertIfGiven)
	if err := ping(s, &tls.Config{RootCAs: tt.pool}); err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	if !refused(s, nil) {
		t.Fatal("plain client accepted in requireTLS")
	}
	log := logText(s)
	if !strings.Contains(log, `"id":22988`) || !strings.Contains(log, "The server is configured to only allow SSL connections") {
		t.Errorf("the refused plain client is not logged as mongod logs it:\n%s", log)
	}
	// The server's certificate is checked by the client: a client trusting another CA fails.
	other := newTestTLS(t)
	if !refused(s, &tls.Config{RootCAs: other.pool}) {
		t.Error("a client that does not trust the server's CA connected")
	}
	if !strings.Contains(logText(s), `"ssl":"on"`) {
		t.Error(`"Waiting for connections" does not say ssl on`)
	}
}

// preferTLS and allowTLS take TLS and plain clients on the same port.
func TestPreferAndAllowTLS(t *testing.T) {
	tt := newTestTLS(t)
	for _, mode := range []TLSMode{TLSPrefer, TLSAllow} {
		t.Run(mode.String(), func(t *testing.T) {
			s := startTLSServer(t, tt, mode, tls.VerifyClientCertIfGiven)
			if err := ping(s, &tls.Config{RootCAs: tt.pool}); err != nil {
				t.Errorf("TLS client: %v", err)
			}
			if err := ping(s, nil); err != nil {
				t.Errorf("plain client: %v", err)
			}
			if got := strings.Contains(logText(s), "is not using SSL"); got != (mode == TLSPrefer) {
				t.Errorf("plain connection logged as not using SSL: %v", got)
			}
		})
	}
}

// A plain message whose length's low byte is 0x16, the first byte of a TLS record, is still
// plain: the header's responseTo tells them apart, as in mongod.
func TestPlainMessageThatLooksLikeTLS(t *testing.T) {
	tt := newTestTLS(t)
	s := startTLSServer(t, tt, TLSPrefer, tls.VerifyClientCertIfGiven)
	nc := rawConn(t, s)
	build := func(comment string) []byte {
		body := bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).AppendString("$db", "admin").
			AppendString("comment", comment).Build()
		return wire.AppendMsg(nil, 9, 0, 0, body)
	}
	msg := build("")
	msg = build(strings.Repeat("x", 0x116-len(msg)))
	if binary.LittleEndian.Uint32(msg) != 0x116 || msg[0] != 0x16 {
		t.Fatalf("message length %#x", binary.LittleEndian.Uint32(msg))
	}
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	reply := readFrame(t, nc)
	if ok := bsoncore.Document(reply[16+4+1:]).Lookup("ok").Double(); ok != 1 {
		t.Errorf("reply %v", bsoncore.Document(reply[16+4+1:]))
	}
}

// With a CA and without allowConnectionsWithoutCertificates, a client must present a
// certificate the CA signed.
func TestClientCertificateRequired(t *testing.T) {
	tt := newTestTLS(t)
	s := startTLSServer(t, tt, TLSRequire, tls.RequireAndVerifyClientCert)
	if !refused(s, &tls.Config{RootCAs: tt.pool}) {
		t.Error("a client without a certificate connected")
	}
	if err := ping(s, &tls.Config{RootCAs: tt.pool, Certificates: []tls.Certificate{tt.client}}); err != nil {
		t.Errorf("client with a certificate: %v", err)
	}
	other := newTestTLS(t)
	if !refused(s, &tls.Config{RootCAs: tt.pool, Certificates: []tls.Certificate{other.client}}) {
		t.Error("a client certificate of another CA was accepted")
	}
	if !strings.Contains(logText(s), "SSLHandshakeFailed") {
		t.Error("the failed handshakes are not logged")
	}
}

// The handshake runs in the connection's goroutine: a client that connects and says nothing
// holds up neither the accept loop nor other clients, and a failed handshake closes only its
// own connection.
func TestHandshakeDoesNotBlockAccept(t *testing.T) {
	tt := newTestTLS(t)
	s := startTLSServer(t, tt, TLSRequire, tls.VerifyClientCertIfGiven)
	silent := rawConn(t, s)
	_ = silent
	o := options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetTLSConfig(&tls.Config{RootCAs: tt.pool}).SetServerSelectionTimeout(5 * time.Second)
	cl, err := mongo.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Disconnect(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatalf("ping while a silent client is connected: %v", err)
	}
	// A TLS-looking header followed by garbage fails its handshake and is closed...
	bad := rawConn(t, s)
	garbage := make([]byte, 64)
	copy(garbage, []byte{0x16, 0x03, 0x01, 0x00, 0x3b, 0x01, 0x00, 0x00, 0x37, 0x03, 0x03})
	if _, err := bad.Write(garbage); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(bad); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("bad handshake: want the connection closed, got %v", err)
	}
	// ...and the other client goes on.
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatalf("ping after a failed handshake: %v", err)
	}
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

func TestParseTLSMode(t *testing.T) {
	for _, name := range []string{"disabled", "allowTLS", "preferTLS", "requireTLS"} {
		m, ok := ParseTLSMode(name)
		if !ok || m.String() != name {
			t.Errorf("%s: %v %v", name, m, ok)
		}
	}
	if _, ok := ParseTLSMode("requireSSL"); ok {
		t.Error("requireSSL parsed as a tlsMode")
	}
}
