// Package proxy is the per-link TCP proxy of Humongo's fault-injection harness
// (ARCHITECTURE.md, testing tier 5): one proxy stands for one network link (client to node, or
// node to node), so a test partitions, slows or cuts a link without root privileges or
// iptables. Faults are switched at run time:
//
//   - SetDelay adds one-way latency to every chunk in both directions, preserving order.
//   - SetBlackhole stops forwarding (per direction or both) without closing anything: bytes
//     are held, as a partitioned network drops packets that TCP later retransmits, so
//     healing delivers them in order, unless a side has given up and closed. New connections
//     are accepted and held until the link heals, like a SYN that is never answered.
//   - DropConnections closes every open connection (both sides see a reset or EOF);
//     SetReject makes the proxy close new connections as soon as they are accepted, as a
//     refused connection looks to a client.
//
// Close stops the listener and every connection and waits for all goroutines.
package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Direction selects one way of a link.
type Direction int

const (
	// ToTarget is traffic from the accepted (client) side to the target.
	ToTarget Direction = 1 << iota
	// FromTarget is traffic from the target back to the client.
	FromTarget
	// Both directions.
	Both = ToTarget | FromTarget
)

// chunkSize bounds one read; queueLen chunks may be in flight per direction (held by a delay
// or a black hole) before the proxy stops reading and TCP flow control pushes back.
const (
	chunkSize   = 32 << 10
	queueLen    = 64
	dialTimeout = 5 * time.Second
)

// faults is the current fault state; a new value replaces it on every change and the
// `changed` channel of the old one is closed, so waiters re-read it (a broadcast without
// sync.Cond, usable in select).
type faults struct {
	delay     time.Duration
	blackhole Direction
	reject    bool
	changed   chan struct{}
}

// Proxy forwards TCP connections accepted on Addr to a target address.
type Proxy struct {
	target string
	ln     net.Listener

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy started

	mu    sync.Mutex
	f     *faults
	conns map[*link]struct{}
	total int // connections accepted, for tests and logs
}

// New listens on listenAddr ("127.0.0.1:0" for an ephemeral port) and forwards to targetAddr.
func New(listenAddr, targetAddr string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target: targetAddr,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		f:      &faults{changed: make(chan struct{})},
		conns:  map[*link]struct{}{},
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address clients connect to (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// update applies fn to a copy of the fault state and wakes everything waiting on the old one.
func (p *Proxy) update(fn func(f *faults)) {
	p.mu.Lock()
	old := p.f
	nf := *old
	nf.changed = make(chan struct{})
	fn(&nf)
	p.f = &nf
	p.mu.Unlock()
	close(old.changed)
}

func (p *Proxy) faults() *faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f
}

// SetDelay sets the one-way latency added to traffic in both directions (0: none). It applies
// to bytes read from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.update(func(f *faults) { f.delay = max(d, 0) }) }

// SetBlackhole starts (on) or stops holding traffic in the given directions.
func (p *Proxy) SetBlackhole(dir Direction, on bool) {
	p.update(func(f *faults) {
		if on {
			f.blackhole |= dir
		} else {
			f.blackhole &^= dir
		}
	})
}

// SetReject makes the proxy close newly accepted connections at once (on) or forward them
// again (off).
func (p *Proxy) SetReject(on bool) { p.update(func(f *faults) { f.reject = on }) }

// Heal removes every fault: no delay, no black hole, no rejection.
func (p *Proxy) Heal() { p.update(func(f *faults) { *f = faults{changed: f.changed} }) }

// DropConnections closes every connection open now and returns how many there were.
func (p *Proxy) DropConnections() int {
	p.mu.Lock()
	ls := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
	return len(ls)
}

// Stats returns the number of connections open now and accepted since New.
func (p *Proxy) Stats() (open, accepted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns), p.total
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.cancel()
	err := p.ln.Close()
	p.DropConnections()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (EMFILE): wait a little rather than spin.
			select {
			case <-time.After(10 * time.Millisecond):
				continue
			case <-p.ctx.Done():
				return
			}
		}
		p.mu.Lock()
		p.total++
		reject := p.f.reject
		p.mu.Unlock()
		if reject {
			_ = c.Close()
			continue
		}
		l := &link{p: p, client: c, done: make(chan struct{})}
		if !p.register(l) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go l.run()
	}
}

func (p *Proxy) register(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return false
	}
	p.conns[l] = struct{}{}
	return true
}

// link is one proxied connection: the accepted client side and the dialed target side.
type link struct {
	p      *Proxy
	client net.Conn

	mu     sync.Mutex
	server net.Conn // nil until dialed
	closed bool
	done   chan struct{} // closed by close()
}

// close tears the link down (idempotent): both sockets are closed, which ends its goroutines.
func (l *link) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.done)
	srv := l.server
	l.mu.Unlock()
	_ = l.client.Close()
	if srv != nil {
		_ = srv.Close()
	}
}

// waitOpen blocks while dir is black-holed; false when the link or proxy closed meanwhile.
func (l *link) waitOpen(dir Direction) bool {
	for {
		f := l.p.faults()
		if f.blackhole&dir == 0 {
			return true
		}
		select {
		case <-f.changed:
		case <-l.done:
			return false
		case <-l.p.ctx.Done():
			return false
		}
	}
}

func (l *link) run() {
	defer l.p.wg.Done()
	defer func() {
		l.close()
		l.p.mu.Lock()
		delete(l.p.conns, l)
		l.p.mu.Unlock()
	}()
	// A connection accepted during a black hole waits, undialed, for the link to heal.
	if !l.waitOpen(ToTarget) {
		return
	}
	ctx, cancel := context.WithTimeout(l.p.ctx, dialTimeout)
	var d net.Dialer
	srv, err := d.DialContext(ctx, "tcp", l.p.target)
	cancel()
	if err != nil {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = srv.Close()
		return
	}
	l.server = srv
	l.mu.Unlock()

	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); l.pipe(l.client, srv, ToTarget) }()
	go func() { defer pipes.Done(); l.pipe(srv, l.client, FromTarget) }()
	pipes.Wait()
}

// chunk is data read at some time, to be delivered no earlier than `at`.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst through a queue so a delay adds latency without limiting throughput:
// a reader stamps chunks with their delivery time, the writer waits for it (and for any black
// hole to lift). At EOF the write side of dst is shut down once the queue drains, so
// half-closes pass through; any error tears the whole link down.
func (l *link) pipe(src, dst net.Conn, dir Direction) {
	q := make(chan chunk, queueLen)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(q)
		for {
			buf := make([]byte, chunkSize)
			n, err := src.Read(buf)
			if n > 0 {
				c := chunk{b: buf[:n], at: time.Now().Add(l.p.faults().delay)}
				select {
				case q <- c:
				case <-l.done:
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					l.close()
				}
				return
			}
		}
	}()
	defer func() { <-readDone }()

	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for c := range q {
		if wait := time.Until(c.at); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-l.done:
				l.drain(q)
				return
			}
		}
		if !l.waitOpen(dir) {
			l.drain(q)
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			l.close()
			l.drain(q)
			return
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	// The other direction may still be running; run closes the link when both finish.
}

// drain discards queued chunks so the reader goroutine, unblocked by the closed link, exits.
func (l *link) drain(q <-chan chunk) {
	for range q {
	}
}
