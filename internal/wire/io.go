package wire

import (
	"bufio"
	"errors"
	"io"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

const (
	// readBufferSize is the bufio size in front of the connection: most requests arrive in
	// one read syscall, header and body together.
	readBufferSize = 16 << 10
	// keepBufferCap is the largest message buffer a Reader keeps between messages; a bigger
	// one (a 48 MB insert batch) is dropped on the next read so idle connections stay small.
	keepBufferCap = 1 << 20
)

// Reader reads whole messages from a connection, reusing one buffer. Not safe for
// concurrent use; one per connection.
type Reader struct {
	br  *bufio.Reader
	buf []byte
}

// NewReader returns a Reader for r (normally a net.Conn).
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, readBufferSize), buf: make([]byte, 0, 4<<10)}
}

// ReadMessage reads and parses the next message into m. Documents in m alias the Reader's
// buffer until the next call.
//
// It returns io.EOF, unwrapped, when the peer closed the connection between messages. Errors
// matching ErrFraming (including I/O errors) leave the stream unusable: close the connection.
// Other errors are about one message that was read entirely: m.Header is valid, and the
// server can answer it with an error and keep reading.
func (r *Reader) ReadMessage(m *Message) error {
	if cap(r.buf) > keepBufferCap {
		r.buf = make([]byte, 0, 4<<10)
	}
	hdr := r.buf[:HeaderLen]
	if n, err := io.ReadFull(r.br, hdr); err != nil {
		m.reset()
		if n == 0 && errors.Is(err, io.EOF) {
			return io.EOF
		}
		return framingErr("reading message header: %v", err)
	}
	h, err := ParseHeader(hdr)
	if err != nil {
		m.reset()
		m.Header = h
		return err
	}
	n := int(h.MessageLength)
	msg, err := r.readBody(n)
	if err != nil {
		m.reset()
		m.Header = h
		return framingErr("reading %d-byte message body: %v", n-HeaderLen, err)
	}
	return m.Parse(msg)
}

// readBody reads the rest of an n-byte message whose header is in r.buf[:HeaderLen] and
// returns the whole message. Messages up to keepBufferCap get their buffer at once; beyond
// that the buffer doubles as bytes arrive, so a header that lies about its length costs
// memory in proportion to what the peer actually sent (at most keepBufferCap more), not to
// the 48 MB it may claim.
func (r *Reader) readBody(n int) ([]byte, error) {
	buf := r.buf[:HeaderLen]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(n, max(2*cap(buf), keepBufferCap)))
			copy(nb, buf)
			buf = nb
			r.buf = nb[:0]
		}
		end := min(n, cap(buf))
		if _, err := io.ReadFull(r.br, buf[len(buf):end]); err != nil {
			return nil, err
		}
		buf = buf[:end]
	}
	return buf, nil
}

// Writer writes whole messages to a connection with one Write call each, reusing its
// buffers. Not safe for concurrent use; one per connection.
type Writer struct {
	w    io.Writer
	buf  []byte // the uncompressed message
	cbuf []byte // its OP_COMPRESSED form
}

// NewWriter returns a Writer for w (normally a net.Conn).
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, 4<<10)}
}

// WriteMsg writes an OP_MSG with one body section, compressed with c (CompressorNone: not
// compressed). Pass the request's Message.Compressor to answer as MongoDB does.
func (w *Writer) WriteMsg(requestID, responseTo int32, flags uint32, body bsoncore.Document, c Compressor) error {
	w.buf = AppendMsg(w.buf[:0], requestID, responseTo, flags, body)
	return w.WriteMessage(w.buf, c)
}

// WriteReply writes an OP_REPLY carrying doc (the answer to an OP_QUERY command).
func (w *Writer) WriteReply(requestID, responseTo int32, responseFlags int32, doc bsoncore.Document, c Compressor) error {
	w.buf = AppendReply(w.buf[:0], requestID, responseTo, responseFlags, doc)
	return w.WriteMessage(w.buf, c)
}

// WriteMessage writes msg, one whole uncompressed message, compressing it with c first.
func (w *Writer) WriteMessage(msg []byte, c Compressor) error {
	out := msg
	if c != CompressorNone {
		var err error
		w.cbuf, err = AppendCompressed(w.cbuf[:0], msg, c)
		if err != nil {
			return err
		}
		out = w.cbuf
	}
	_, err := w.w.Write(out)
	w.shrink()
	return err
}

// shrink drops buffers grown by an unusually large reply.
func (w *Writer) shrink() {
	if cap(w.buf) > keepBufferCap {
		w.buf = make([]byte, 0, 4<<10)
	}
	if cap(w.cbuf) > keepBufferCap {
		w.cbuf = nil
	}
}
