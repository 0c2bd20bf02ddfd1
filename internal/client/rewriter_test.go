package client

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"humongo/internal/mongoerr"
)

// echoServer accepts connections on 127.0.0.1 and answers each with its own name, then echoes.
type echoServer struct {
	ln   net.Listener
	name string
	wg   sync.WaitGroup
}

func newEcho(t *testing.T, name string) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, name: name}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				if _, err := c.Write([]byte(name)); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

// dialName dials host through r and returns which server answered.
func dialName(t *testing.T, r *Rewriter, host string) (net.Conn, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := r.DialContext(ctx, "tcp", host)
	if err != nil {
		t.Fatalf("dial %s: %v", host, err)
	}
	buf := make([]byte, 1)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read from %s: %v", host, err)
	}
	return c, string(buf)
}

func TestRewriteRoutesDials(t *testing.T) {
	a, b := newEcho(t, "a"), newEcho(t, "b")
	var r Rewriter
	c, name := dialName(t, &r, a.addr())
	if name != "a" {
		t.Fatalf("no rewrite: dialed %s, want a", name)
	}
	_ = c.Close()
	if _, _, err := r.Set(map[string]string{a.addr(): b.addr()}); err != nil {
		t.Fatal(err)
	}
	if got := r.Rewrite(a.addr()); got != b.addr() {
		t.Fatalf("Rewrite(%s) = %s, want %s", a.addr(), got, b.addr())
	}
	if got := r.Rewrite(b.addr()); got != b.addr() {
		t.Fatalf("an unmapped host must dial itself, got %s", got)
	}
	c, name = dialName(t, &r, a.addr())
	if name != "b" {
		t.Fatalf("rewritten: dialed %s, want b", name)
	}
	_ = c.Close()
	if n := r.Open(); n != 0 {
		t.Fatalf("%d connections tracked after Close, want 0", n)
	}
	prev, _, err := r.Set(nil)
	if err != nil || prev[a.addr()] != b.addr() || len(prev) != 1 {
		t.Fatalf("Set(nil) = %v, %v; want the previous map", prev, err)
	}
	if len(r.Rewrites()) != 0 || r.Rewrite(a.addr()) != a.addr() {
		t.Fatalf("rewrites not cleared: %v", r.Rewrites())
	}
}

// A change closes exactly the connections whose target moved, so a partition takes effect at
// once for pooled connections.
func TestSetClosesMovedConnections(t *testing.T) {
	a, b, c := newEcho(t, "a"), newEcho(t, "b"), newEcho(t, "c")
	var r Rewriter
	toA, _ := dialName(t, &r, a.addr())
	toB, _ := dialName(t, &r, b.addr())
	defer toA.Close()
	defer toB.Close()
	if n := r.Open(); n != 2 {
		t.Fatalf("%d open, want 2", n)
	}
	// a moves to c; b's rewrite to itself is no change for its connection.
	_, closed, err := r.Set(map[string]string{a.addr(): c.addr(), b.addr(): b.addr()})
	if err != nil {
		t.Fatal(err)
	}
	if closed != 1 {
		t.Fatalf("closed %d connections, want 1", closed)
	}
	_ = toA.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := toA.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a connection whose target moved: %v, want net.ErrClosed", err)
	}
	if _, err := toB.Write([]byte("x")); err != nil {
		t.Fatalf("the unmoved connection was disturbed: %v", err)
	}
	buf := make([]byte, 1)
	_ = toB.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(toB, buf); err != nil || buf[0] != 'x' {
		t.Fatalf("echo on the unmoved connection: %q %v", buf, err)
	}
	if err := toA.Close(); !errors.Is(err, net.ErrClosed) && err != nil {
		t.Fatalf("second close: %v", err)
	}
	if n := r.Open(); n != 1 {
		t.Fatalf("%d open, want 1", n)
	}
}

func TestSetRejectsBadHosts(t *testing.T) {
	var r Rewriter
	if _, _, err := r.Set(map[string]string{"127.0.0.1:1": "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]string{
		{"nohostport": "127.0.0.1:2"},
		{"127.0.0.1:1": ":2"},
		{"127.0.0.1:1": "127.0.0.1:0"},
		{"127.0.0.1:1": "127.0.0.1:70000"},
		{"127.0.0.1:x": "127.0.0.1:2"},
	} {
		_, _, err := r.Set(m)
		var me *mongoerr.Error
		if !errors.As(err, &me) || me.Code != mongoerr.BadValue {
			t.Errorf("Set(%v) = %v, want BadValue", m, err)
		}
	}
	if got := r.Rewrite("127.0.0.1:1"); got != "127.0.0.1:2" {
		t.Fatalf("a rejected Set changed the map: %s", got)
	}
}
