package client

import (
	"testing"

	"humongo/internal/mongoerr"
)

// A Pool hands out one client per host, and none after Close. mongo.Connect does not dial, so
// no member needs to run.
func TestPoolGetAndClose(t *testing.T) {
	p := NewPool(Options{AppName: "test-pool", PollMonitoring: true})
	a1, err := p.Get("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	a2, err := p.Get("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if a1 != a2 {
		t.Fatal("two clients for one host")
	}
	b, err := p.Get("127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	if b == a1 {
		t.Fatal("one client for two hosts")
	}
	p.Close()
	if _, err := p.Get("127.0.0.1:1"); !mongoerr.Is(err, mongoerr.ShutdownInProgress) {
		t.Fatalf("Get after Close: %v, want ShutdownInProgress", err)
	}
	p.Close() // a second Close is a no-op
}
