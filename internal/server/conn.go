package server

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/wire"
)

// conn is one client connection, served by one goroutine (serveConn).
type conn struct {
	// nc is the socket: shutdown and the peer watch set its deadlines and close it. Messages
	// are read and written through r and w, over the TLS session on it when there is one.
	nc   net.Conn
	info *service.Conn
	r    *wire.Reader
	w    *wire.Writer
	// ioFailed is set by the reader when the socket returned an error (reset, deadline).
	ioFailed bool
}

func (s *Server) newConn(nc net.Conn) *conn {
	remote, local := nc.RemoteAddr().String(), nc.LocalAddr().String()
	loopback := false
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		loopback = ta.IP.IsLoopback()
	}
	c := &conn{nc: nc, info: s.state.Clients.NewConn(remote, local, loopback)}
	s.setStream(c, nc)
	return c
}

// setStream makes the connection read and write its messages through rw.
func (s *Server) setStream(c *conn, rw io.ReadWriter) {
	c.r = wire.NewReader(countingReader{rw, &s.state.Counters.BytesIn, &c.ioFailed})
	c.w = wire.NewWriter(countingWriter{rw, &s.state.Counters.BytesOut})
}

// serveConn reads and answers requests until the client leaves, a framing error occurs, a
// command asks to close the connection, or shutdown wakes the read.
func (s *Server) serveConn(c *conn) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(s.rootCtx)
	defer cancel()
	var reason error
	if s.cfg.TLS.Mode != TLSDisabled {
		var stream io.ReadWriter
		if stream, reason = s.startTLS(c); reason == nil {
			s.setStream(c, stream)
		} else if reason != errClientLeft {
			s.log.Warn("Error receiving request from client. Ending connection from remote",
				logv2.C(logv2.Network), logv2.ID(22988), logv2.Ctx(c.info.Desc()),
				"error", reason.Error(), "remote", c.info.Remote, "connectionId", c.info.ID)
		}
	}
	if reason == nil {
		reason = s.connLoop(ctx, c)
	} else if reason == errClientLeft {
		reason = nil
	}
	_ = c.nc.Close()
	n := s.removeConn(c)
	if reason != nil {
		s.log.Info("Ending connection", logv2.C(logv2.Network), logv2.ID(22989), logv2.Ctx(c.info.Desc()),
			"remote", c.info.Remote, "connectionId", c.info.ID, "error", reason.Error())
	}
	s.connLog("Connection ended", 22944, c.info.Desc(), "remote", c.info.Remote,
		"connectionId", c.info.ID, "connectionCount", n)
}

// connLoop returns why the connection ended when it was not a clean client disconnect or a
// shutdown.
func (s *Server) connLoop(ctx context.Context, c *conn) error {
	var m wire.Message
	// A large message waits for room in the in-flight budget before its body is read, and
	// holds it until its command has answered (Release below).
	c.r.SetGate(func(n int) (func(), error) { return s.inflight.acquire(ctx, int64(n)) })
	defer c.r.Release()
	for {
		err := c.r.ReadMessage(&m)
		if err != nil {
			if errors.Is(err, io.EOF) || s.isClosing() || c.ioFailed {
				return nil
			}
			if errors.Is(err, wire.ErrFraming) {
				s.log.Warn("Error receiving request from client. Ending connection from remote",
					logv2.C(logv2.Network), logv2.ID(22988), logv2.Ctx(c.info.Desc()),
					"error", err.Error(), "remote", c.info.Remote, "connectionId", c.info.ID)
				return errMalformed
			}
			if closeConn := s.answerBadMessage(c, &m, err); closeConn {
				return err
			}
			continue
		}
		s.state.Counters.NumRequests.Add(1)
		var closeConn bool
		switch m.OpCode {
		case wire.OpMsg:
			closeConn = s.handleMsg(ctx, c, &m)
		case wire.OpQuery:
			closeConn = s.handleQuery(ctx, c, &m)
		default:
			// The wire layer rejects every other opcode, so this is a programming error; still,
			// never crash on it.
			return mongoerr.Newf(mongoerr.ProtocolError, "unexpected opcode %v", m.OpCode)
		}
		c.r.Release()
		if closeConn {
			return nil
		}
	}
}

var errMalformed = errors.New("malformed message")

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// answerBadMessage answers a message that was read whole but could not be parsed: an OP_MSG
// or OP_QUERY gets an error reply (unless it was fire-and-forget); a removed legacy opcode is
// logged, and OP_GET_MORE, which expects an answer, gets an OP_REPLY failure. It reports
// whether the connection must close.
func (s *Server) answerBadMessage(c *conn, m *wire.Message, err error) bool {
	s.log.Warn("Invalid message from client", logv2.C(logv2.Network), logv2.ID(22990),
		logv2.Ctx(c.info.Desc()), "opCode", m.Header.OpCode.String(), "error", err.Error())
	var legacy *wire.LegacyOpcodeError
	switch {
	case errors.As(err, &legacy):
		if legacy.OpCode == wire.OpGetMore {
			return c.w.WriteReply(s.nextRequestID(), m.Header.RequestID, wire.ReplyQueryFailure,
				legacyFailure(err), m.Compressor) != nil
		}
		return false
	case m.OpCode == wire.OpMsg:
		if m.Msg.MoreToCome() {
			return false
		}
		return c.w.WriteMsg(s.nextRequestID(), m.Header.RequestID, 0, errorReply(err, nil, topology{}), m.Compressor) != nil
	case m.OpCode == wire.OpQuery:
		return c.w.WriteReply(s.nextRequestID(), m.Header.RequestID, wire.ReplyAwaitCapable,
			errorReply(err, nil, topology{}), m.Compressor) != nil
	}
	return true
}

// legacyFailure is the {$err, code} document of an OP_REPLY with QueryFailure.
func legacyFailure(err error) bsoncore.Document {
	me, ok := mongoerr.As(err)
	if !ok {
		me = mongoerr.New(mongoerr.InternalError, err.Error())
	}
	return bsoncore.NewDocumentBuilder().AppendString("$err", me.Msg).
		AppendInt32("code", int32(me.Code)).Build()
}

func (s *Server) nextRequestID() int32 { return s.reqID.Add(1) }

// handleMsg runs an OP_MSG command and writes the reply(ies). It reports whether the
// connection must close.
func (s *Server) handleMsg(ctx context.Context, c *conn, m *wire.Message) bool {
	compressor := m.Compressor
	responseTo := m.Header.RequestID
	moreToCome := m.Msg.MoreToCome()
	exhaustAllowed := m.Msg.ExhaustAllowed() && !moreToCome
	cmd, err := m.Msg.Command()
	// The command is all that is needed now: let a large message's own buffers go (with
	// document sequences, cmd is a merged copy and the message's bytes are garbage).
	c.r.ReleaseBuffers()
	var res result
	if err != nil {
		res = result{reply: errorReply(err, nil, topology{}), err: err}
	} else {
		res = s.runWatched(ctx, c, cmd, false, exhaustAllowed)
	}
	for {
		if res.closeConn {
			return true
		}
		if moreToCome {
			// Fire-and-forget: no reply. A not-primary failure closes the connection so the
			// client notices, as in mongod.
			return res.err != nil && mongoerr.IsNotPrimaryError(mongoerr.CodeOf(res.err))
		}
		var flags uint32
		streaming := res.exhaust && res.err == nil && !s.isClosing()
		if streaming {
			flags = wire.FlagMoreToCome
		}
		id := s.nextRequestID()
		if err := c.w.WriteMsg(id, responseTo, flags, res.reply, compressor); err != nil {
			return true
		}
		if !streaming {
			return false
		}
		// Exhaust: answer again, unprompted, naming the previous reply as responseTo. An
		// awaitable hello must wait for a change past the topologyVersion it just reported,
		// not the one in the original request (else it answers at once, forever).
		responseTo = id
		cmd = withReplyTopologyVersion(cmd, res.reply)
		res = s.runWatched(ctx, c, cmd, false, true)
	}
}

// runWatched runs a command whose context is cancelled (ClientDisconnect) if the client
// closes the connection meanwhile (see peerWatch).
func (s *Server) runWatched(ctx context.Context, c *conn, cmd bsoncore.Document, legacy, exhaustAllowed bool) result {
	ctx, stop := s.watchPeer(ctx, c)
	defer stop()
	return s.runCommand(ctx, c.info, cmd, legacy, exhaustAllowed)
}

// withReplyTopologyVersion returns cmd with its topologyVersion replaced by reply's, when both
// carry one; otherwise cmd unchanged.
func withReplyTopologyVersion(cmd, reply bsoncore.Document) bsoncore.Document {
	tv, ok := reply.Lookup("topologyVersion").DocumentOK()
	if !ok || cmd.Lookup("topologyVersion").Type == 0 {
		return cmd
	}
	elems, err := cmd.Elements()
	if err != nil {
		return cmd
	}
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(cmd)+len(tv)))
	for _, e := range elems {
		if e.Key() == "topologyVersion" {
			out = bsoncore.AppendDocumentElement(out, "topologyVersion", tv)
			continue
		}
		out = append(out, e...)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// handleQuery runs a legacy OP_QUERY command (the handshake) and answers with OP_REPLY.
func (s *Server) handleQuery(ctx context.Context, c *conn, m *wire.Message) bool {
	q := &m.Query
	var reply bsoncore.Document
	flags := wire.ReplyAwaitCapable
	if !q.IsCommand() {
		// Legacy find was removed in MongoDB 5.1: answer with a query failure.
		s.state.Counters.Query.Add(1)
		_, err := q.Command()
		reply, flags = legacyFailure(err), wire.ReplyQueryFailure
	} else if cmd, err := q.Command(); err != nil {
		reply = errorReply(err, nil, topology{})
	} else {
		res := s.runWatched(ctx, c, cmd, true, false)
		if res.closeConn {
			return true
		}
		reply = res.reply
	}
	return c.w.WriteReply(s.nextRequestID(), m.Header.RequestID, flags, reply, m.Compressor) != nil
}

// maxTimeMSLimit is the largest maxTimeMS MongoDB accepts (INT_MAX).
const maxTimeMSLimit = 1<<31 - 1

// requestTimeout parses maxTimeMS (0 = none).
func requestTimeout(cmd bsoncore.Document) (time.Duration, error) {
	v, err := cmd.LookupErr("maxTimeMS")
	if err != nil {
		return 0, nil
	}
	f, ok := service.AsFloat(v)
	if !ok {
		return 0, mongoerr.New(mongoerr.BadValue, "maxTimeMS must be a number")
	}
	// max_time_ms_parser.cpp: the range is checked on the value as a long, then a double
	// must be integral.
	if n := int64(f); f < math.MinInt64 || f >= math.MaxInt64 || n < 0 || n > maxTimeMSLimit {
		return 0, mongoerr.Newf(mongoerr.BadValue, "%d value for maxTimeMS is out of range [0, %d]", n, maxTimeMSLimit)
	}
	if f != float64(int64(f)) {
		return 0, mongoerr.New(mongoerr.BadValue, "maxTimeMS has non-integral value")
	}
	return time.Duration(f) * time.Millisecond, nil
}
