package server

import (
	"context"
	"net"
	"sync"
	"syscall"
	"time"

	"humongo/internal/mongoerr"
)

// watchAfter is how long a command runs before its connection is watched for the client
// going away: short commands (nearly all) pay one timer and no system call.
const watchAfter = 50 * time.Millisecond

// peerWatch cancels a running command's context when its client closes the connection
// (MongoDB interrupts the operations of a session whose socket is gone: ClientDisconnect).
//
// Design: the connection loop does not read while a command runs, so a watcher may look at
// the socket without taking bytes from the next message. It peeks (MSG_PEEK: nothing is
// consumed) when the socket becomes readable: zero bytes is end of file (the client
// closed), an error is a reset; data means the client is alive and pipelining, and the
// watch ends there (it cannot wait for more without spinning). Pipelined and exhaust
// (moreToCome) traffic is therefore untouched: nothing the connection loop reads is taken.
// The watcher starts only once the command has run for watchAfter, and stop ends it by
// waking the poller with a past read deadline, which it then clears (or restores, if
// shutdown set one meanwhile to wake the connection).
type peerWatch struct {
	s      *Server
	nc     net.Conn
	rc     syscall.RawConn
	cancel context.CancelCauseFunc
	timer  *time.Timer

	mu      sync.Mutex
	stopped bool
	started bool
	done    chan struct{}
}

// watchPeer returns the context to run a command under and the function that must be called
// when the command has finished, before the connection reads again.
func (s *Server) watchPeer(ctx context.Context, c *conn) (context.Context, func()) {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return ctx, func() {}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	w := &peerWatch{s: s, nc: c.nc, rc: rc, cancel: cancel, done: make(chan struct{})}
	w.timer = time.AfterFunc(watchAfter, w.run)
	return ctx, w.stop
}

// run is the watcher goroutine (started by the timer; stop waits for it to return).
func (w *peerWatch) run() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.started = true
	w.mu.Unlock()
	defer close(w.done)
	if peerClosed(w.rc) {
		w.cancel(mongoerr.New(mongoerr.ClientDisconnect, "operation was interrupted because a client disconnected"))
	}
}

func (w *peerWatch) stop() {
	w.timer.Stop()
	w.mu.Lock()
	w.stopped = true
	started := w.started
	w.mu.Unlock()
	if started {
		_ = w.nc.SetReadDeadline(time.Unix(1, 0))
		<-w.done
		_ = w.nc.SetReadDeadline(time.Time{})
		// Shutdown marks the server closing before it sets past deadlines to wake the
		// connections: if it is closing, the deadline just cleared may have been its.
		if w.s.isClosing() {
			_ = w.nc.SetReadDeadline(time.Unix(1, 0))
		}
	}
	w.cancel(nil)
}
