package server

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
)

// TLSMode is net.tls.mode: which connections the listeners accept.
type TLSMode int

const (
	// TLSDisabled accepts plain connections only (the default).
	TLSDisabled TLSMode = iota
	// TLSAllow accepts TLS and plain connections; members connect to each other plainly.
	TLSAllow
	// TLSPrefer accepts both; members connect to each other with TLS.
	TLSPrefer
	// TLSRequire accepts TLS connections only.
	TLSRequire
)

var tlsModeNames = [...]string{"disabled", "allowTLS", "preferTLS", "requireTLS"}

// ParseTLSMode parses mongod's name of a mode.
func ParseTLSMode(s string) (TLSMode, bool) {
	for i, n := range tlsModeNames {
		if n == s {
			return TLSMode(i), true
		}
	}
	return TLSDisabled, false
}

func (m TLSMode) String() string { return tlsModeNames[m] }

// TLS is the server side of net.tls.
type TLS struct {
	Mode TLSMode
	// Config is the server's TLS configuration (certificate, client certificate policy);
	// required unless Mode is TLSDisabled.
	Config *tls.Config
}

// tlsHandshakeTimeout bounds the wait for the first message header and the TLS handshake of
// a new connection. A driver sends its handshake at once; the bound keeps a client that
// connects and says nothing from holding a connection slot forever in the TLS modes.
const tlsHandshakeTimeout = 10 * time.Second

// errClientLeft ends a connection whose client left before its first message: no log line,
// as a disconnect between messages has none.
var errClientLeft = errors.New("client left before its first message")

// startTLS tells, for a server with TLS enabled, a TLS client from a plain one and runs the
// TLS handshake, in the connection's own goroutine so that the accept loop never waits on a
// client. As mongod does, it reads the first message header: a client's first wire message
// has responseTo 0 (or -1), while the same bytes of a TLS ClientHello hold the handshake
// length and client version, never 0 or -1. That header is then read again by whichever
// reader follows (replayConn). It returns the stream to read messages from.
func (s *Server) startTLS(c *conn) (io.ReadWriter, error) {
	t := s.cfg.TLS
	_ = c.nc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	// Shutdown marks the server closing before it sets past read deadlines: if it began
	// already, the deadline just set may have replaced its.
	if s.isClosing() {
		return nil, errClientLeft
	}
	var hdr [16]byte
	if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || s.isClosing() {
			return nil, errClientLeft
		}
		return nil, mongoerr.Newf(mongoerr.SSLHandshakeFailed, "reading the first message: %w", err)
	}
	replay := &replayConn{Conn: c.nc, prefix: hdr[:]}
	var stream net.Conn = replay
	if responseTo := int32(binary.LittleEndian.Uint32(hdr[8:12])); responseTo == 0 || responseTo == -1 {
		switch t.Mode {
		case TLSRequire:
			return nil, mongoerr.New(mongoerr.SSLHandshakeFailed, "The server is configured to only allow SSL connections")
		case TLSPrefer:
			s.log.Info("SSL mode is set to 'preferred' and connection to remote is not using SSL.", logv2.C(logv2.Network),
				logv2.ID(23838), logv2.Ctx(c.info.Desc()), "connectionId", c.info.ID, "remote", c.info.Remote)
		}
	} else {
		tc := tls.Server(replay, t.Config)
		if err := tc.Handshake(); err != nil {
			if s.isClosing() {
				return nil, errClientLeft
			}
			return nil, mongoerr.Newf(mongoerr.SSLHandshakeFailed, "%w", err)
		}
		stream = tc
	}
	_ = c.nc.SetDeadline(time.Time{})
	// Shutdown marks the server closing before it sets past read deadlines to wake the
	// connections: the deadline just cleared may have been its.
	if s.isClosing() {
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	}
	return stream, nil
}

// replayConn reads prefix, bytes already read from Conn, before reading Conn again.
type replayConn struct {
	net.Conn
	prefix []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.prefix) > 0 {
		n := copy(p, r.prefix)
		r.prefix = r.prefix[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}
