package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer answers every line with the same line until the client closes.
func echoServer(t *testing.T) (addr string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		n     int
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{c, bufio.NewReader(c)}
}

// roundTrip sends line and waits up to timeout for the echo.
func (c *client) roundTrip(line string, timeout time.Duration) (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func mustEcho(t *testing.T, c *client, line string) {
	t.Helper()
	got, err := c.roundTrip(line, 5*time.Second)
	if err != nil || got != line {
		t.Fatalf("echo %q: got %q, %v", line, got, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestForwardAndLargeTransfer(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	mustEcho(t, c, "hello")
	// 4 MiB each way, more than the proxy's queue, with a concurrent reader.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18)
	errc := make(chan error, 1)
	go func() {
		_, err := c.c.Write(append(big, '\n'))
		errc <- err
	}()
	_ = c.c.SetDeadline(time.Now().Add(20 * time.Second))
	got, err := c.r.ReadBytes('\n')
	if err != nil || !bytes.Equal(got[:len(got)-1], big) {
		t.Fatalf("large echo: %d bytes, %v", len(got), err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if open, accepted := p.Stats(); open != 1 || accepted != 1 {
		t.Errorf("Stats() = %d open, %d accepted", open, accepted)
	}
}

func TestHalfClosePassesThrough(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	if _, err := c.c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	_ = c.c.(*net.TCPConn).CloseWrite()
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c.r)
	if err != nil || string(got) != "last words" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestDelay(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	mustEcho(t, c, "warm")
	p.SetDelay(100 * time.Millisecond)
	start := time.Now()
	mustEcho(t, c, "slow")
	// One-way delay in each direction: at least 200ms for a round trip.
	if rtt := time.Since(start); rtt < 200*time.Millisecond {
		t.Fatalf("round trip %v with 100ms each way", rtt)
	}
	p.SetDelay(0)
	start = time.Now()
	mustEcho(t, c, "fast")
	if rtt := time.Since(start); rtt > 150*time.Millisecond {
		t.Errorf("round trip %v after removing the delay", rtt)
	}
}

func TestBlackholeHoldsThenHeals(t *testing.T) {
	target, accepted := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	mustEcho(t, c, "before")

	p.SetBlackhole(Both, true)
	if _, err := c.roundTrip("held", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("black-holed round trip: want a timeout, got %v", err)
	}
	// A new connection is accepted but not forwarded: the target never sees it.
	c2 := dial(t, p.Addr())
	if _, err := c2.roundTrip("new", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection during black hole: want a timeout, got %v", err)
	}
	if n := accepted(); n != 1 {
		t.Fatalf("target accepted %d connections during the black hole, want 1", n)
	}

	// Healing delivers what was held, in order, on both connections.
	p.Heal()
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if s, err := c.r.ReadString('\n'); err != nil || s != "held\n" {
		t.Fatalf("after heal: %q, %v", s, err)
	}
	mustEcho(t, c, "after")
	_ = c2.c.SetDeadline(time.Now().Add(5 * time.Second))
	if s, err := c2.r.ReadString('\n'); err != nil || s != "new\n" {
		t.Fatalf("held connection after heal: %q, %v", s, err)
	}
}

func TestBlackholeOneWay(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c := dial(t, p.Addr())
	mustEcho(t, c, "x")
	// Requests reach the server but replies are held: the asymmetric partition.
	p.SetBlackhole(FromTarget, true)
	if _, err := c.roundTrip("one-way", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("want a timeout, got %v", err)
	}
	p.SetBlackhole(FromTarget, false)
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if s, err := c.r.ReadString('\n'); err != nil || s != "one-way\n" {
		t.Fatalf("after heal: %q, %v", s, err)
	}
}

func TestDropAndReject(t *testing.T) {
	target, _ := echoServer(t)
	p := newProxy(t, target)
	c1, c2 := dial(t, p.Addr()), dial(t, p.Addr())
	mustEcho(t, c1, "a")
	mustEcho(t, c2, "b")
	if n := p.DropConnections(); n != 2 {
		t.Fatalf("dropped %d connections, want 2", n)
	}
	for _, c := range []*client{c1, c2} {
		if _, err := c.roundTrip("gone", 5*time.Second); err == nil || isTimeout(err) {
			t.Fatalf("dropped connection: want EOF or reset, got %v", err)
		}
	}
	// New connections still work after a drop.
	mustEcho(t, dial(t, p.Addr()), "c")

	p.SetReject(true)
	c3 := dial(t, p.Addr()) // the kernel completes the handshake; the proxy closes at once
	if _, err := c3.roundTrip("refused", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("rejected connection: want EOF or reset, got %v", err)
	}
	p.SetReject(false)
	mustEcho(t, dial(t, p.Addr()), "d")
}

// TestCloseStopsEverything: Close returns with connections open, black-holed and delayed, and
// leaves no goroutines behind.
func TestCloseStopsEverything(t *testing.T) {
	target, _ := echoServer(t)
	before := runtime.NumGoroutine()
	p, err := New("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	mustEcho(t, c, "x")
	p.SetDelay(time.Hour)
	_, _ = c.c.Write([]byte("delayed\n"))
	p.SetBlackhole(Both, true)
	held := dial(t, p.Addr())
	_, _ = held.c.Write([]byte("held\n"))
	time.Sleep(50 * time.Millisecond) // let the proxy accept and read

	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung")
	}
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal("connection still open after Close")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("listener still open after Close")
	}
	// The echo server's goroutines for the closed connections finish asynchronously.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+1 {
		buf := make([]byte, 1<<16)
		os.Stderr.Write(buf[:runtime.Stack(buf, true)])
		t.Fatalf("%d goroutines after Close, %d before New", n, before)
	}
}

func TestNewBadAddress(t *testing.T) {
	if _, err := New("256.0.0.1:0", "127.0.0.1:1"); err == nil {
		t.Fatal("New on an invalid address succeeded")
	}
}

// TestTargetDown: a connection to a dead target is closed rather than held forever.
func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := newProxy(t, addr)
	c := dial(t, p.Addr())
	if _, err := c.roundTrip("anyone?", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("want EOF or reset, got %v", err)
	}
}
