package integration

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/certs"
)

// tlsURI is s's URI for a driver that trusts the CA file ca.
func tlsURI(s *server, ca string) string {
	return s.uri() + "&tls=true&tlsCAFile=" + url.QueryEscape(ca)
}

// pingURI connects to uri and pings, within selection.
func pingURI(uri string, selection time.Duration) error {
	cl, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(selection).SetConnectTimeout(selection))
	if err != nil {
		return err
	}
	defer func() { _ = cl.Disconnect(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), selection+5*time.Second)
	defer cancel()
	return cl.Ping(ctx, nil)
}

// A real humongod in requireTLS serves a driver that trusts its CA and refuses a plain one; in
// preferTLS it serves both on the same port.
func TestTLSModes(t *testing.T) {
	f, err := certs.EnsureLocal(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tlsArgs := func(mode string) []string {
		return []string{"--tlsMode", mode, "--tlsCertificateKeyFile", f.Server, "--tlsCAFile", f.CA,
			"--tlsAllowConnectionsWithoutCertificates"}
	}

	s := newServer(t, "", tlsArgs("requireTLS")...)
	cl := connect(t, tlsURI(s, f.CA))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	coll := cl.Database("tls").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "over", Value: "tls"}}); err != nil {
		t.Fatalf("insert over TLS: %v", err)
	}
	var doc bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil || doc["over"] != "tls" {
		t.Fatalf("find over TLS: %v %v", doc, err)
	}
	var opts struct {
		Parsed struct {
			Net struct {
				TLS struct {
					Mode string `bson:"mode"`
				} `bson:"tls"`
			} `bson:"net"`
		} `bson:"parsed"`
	}
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "getCmdLineOpts", Value: 1}}).Decode(&opts); err != nil ||
		opts.Parsed.Net.TLS.Mode != "requireTLS" {
		t.Errorf("getCmdLineOpts: %+v %v", opts, err)
	}
	if err := pingURI(s.uri(), time.Second); err == nil {
		t.Error("a plain client connected to a requireTLS server")
	}
	if !strings.Contains(s.tail(200), "The server is configured to only allow SSL connections") {
		t.Error("the refused plain client is not in the log")
	}
	// The driver still works after the refusal: one connection failed, not the server.
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatalf("ping after a refused client: %v", err)
	}

	p := newServer(t, "", tlsArgs("preferTLS")...)
	if err := pingURI(tlsURI(p, f.CA), 10*time.Second); err != nil {
		t.Errorf("preferTLS, TLS client: %v", err)
	}
	if err := pingURI(p.uri(), 10*time.Second); err != nil {
		t.Errorf("preferTLS, plain client: %v", err)
	}
}

// A certificate-key file humongod cannot use fails startup with mongod's message and exit
// code 2 (bad options).
func TestTLSBadKeyFile(t *testing.T) {
	dir := t.TempDir()
	f, err := certs.EnsureLocal(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, binPath, "--port", "0", "--dbpath", filepath.Join(dir, "db"),
		"--tlsMode", "requireTLS", "--tlsCertificateKeyFile", missing, "--tlsCAFile", f.CA).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("want exit code 2, got %v\n%s", err, out)
	}
	if want := fmt.Sprintf("Can not set up PEM key file: cannot read PEM key file %s", missing); !strings.Contains(string(out), want) {
		t.Errorf("output %q lacks %q", out, want)
	}
}
