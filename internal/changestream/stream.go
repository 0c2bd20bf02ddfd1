package changestream

import (
	"bytes"
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/agg"
	"humongo/internal/changestream/event"
	"humongo/internal/changestream/resumetoken"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// scanEntries bounds the oplog entries one scan reads, so a stream far behind returns a
// batch without first reading its whole backlog.
const scanEntries = 1000

// Config is what a stream needs from its node and its command.
type Config struct {
	Engine     *storage.Engine
	OplogIdent string
	// Majority returns the newest timestamp the stream may read up to: the node's
	// majority-committed snapshot (its stable timestamp), so no event can roll back.
	Majority func() optime.Timestamp
	Spec     *Spec
	Scope    event.Scope
	// Start is where a stream without resumeAfter, startAfter or startAtOperationTime starts
	// (inclusive): one tick past the node's newest oplog entry when it opened.
	Start optime.Timestamp
	// Pipeline holds the user's stages after $changeStream (nil: none), run over each event
	// with AggContext.
	Pipeline   *agg.Pipeline
	AggContext *agg.Context
	// LookupPost reads the current version of an update's document (fullDocument:
	// updateLookup): nil when there is none.
	LookupPost func(ctx context.Context, ev *event.Event) (bsoncore.Document, error)
	// PreImage finds the document before an update, replace or delete
	// (fullDocumentBeforeChange, and fullDocument whenAvailable/required); ok false when none
	// was recorded. Nil: no pre-images on this node.
	PreImage func(ctx context.Context, ev *event.Event) (doc bsoncore.Document, ok bool, err error)
	// PostImage applies an update to its pre-image (fullDocument whenAvailable/required).
	PostImage func(pre bsoncore.Document, ev *event.Event) (bsoncore.Document, error)
	// SplitLargeEvents: the pipeline ended with $changeStreamSplitLargeEvent, so an event
	// over MaxEventSize is returned as fragments (split.go) instead of failing.
	SplitLargeEvents bool
}

// Stream is one open change stream: it scans the majority-committed oplog from its resume
// point and turns the entries into events. Not safe for concurrent use (a cursor's getMores
// are serialised by the cursor manager's pin). It holds no snapshot between calls.
type Stream struct {
	cfg  Config
	opts event.Options

	// next is the oldest timestamp not scanned yet: every entry below it was turned into
	// events (in pending or already consumed).
	next optime.Timestamp
	// resume is the token events must pass before they are returned (nil: none); mustFind
	// says the token names an event that must be found (not a high-water mark).
	resume   *resumetoken.Data
	mustFind bool
	pending  []event.Event
	// pos is the token of the last event consumed (returned or dropped by the user's
	// pipeline); nil before the first.
	pos *resumetoken.Data
	// unread is a finished event document handed back by the caller (its batch was full),
	// returned by the next call to Next; unreadPos is pos before it was consumed.
	unread    bsoncore.Document
	unreadPos *resumetoken.Data
	// frags are the fragments of a split event still to return, before anything else.
	frags []fragment
	// done: the stream returned an invalidate event and ends.
	done bool
	// checkedHistory: the start point was checked against the oldest oplog entry.
	checkedHistory bool
}

// Open starts a stream. The start point is checked when the first scan runs.
func Open(cfg Config) (*Stream, error) {
	s := &Stream{cfg: cfg}
	sp := cfg.Spec
	s.opts = event.Options{
		Scope:                    cfg.Scope,
		ShowExpandedEvents:       sp.ShowExpandedEvents,
		ShowSystemEvents:         sp.ShowSystemEvents,
		ShowRawUpdateDescription: sp.ShowRawUpdateDescription,
		MakeID:                   makeID,
	}
	switch tok := sp.ResumeToken(); {
	case tok != nil:
		s.next = tok.ClusterTime
		if tok.IsHighWaterMark() {
			// Every event at or after its time sorts after a high-water mark: nothing to
			// skip.
			hw := *tok
			s.pos = &hw
		} else {
			s.resume, s.mustFind = tok, true
		}
	case sp.StartAtOperationTime != 0:
		s.next = sp.StartAtOperationTime
	default:
		s.next = cfg.Start
	}
	return s, nil
}

// makeID encodes an event's resume token as its _id.
func makeID(t *event.Token) (bsoncore.Document, error) {
	return resumetoken.Make(tokenData(t))
}

func tokenData(t *event.Token) resumetoken.Data {
	return resumetoken.Data{
		ClusterTime:    t.ClusterTime,
		Version:        resumetoken.DefaultVersion,
		TokenType:      resumetoken.Event,
		TxnOpIndex:     t.TxnOpIndex,
		FromInvalidate: t.FromInvalidate,
		UUID:           t.UUID,
		EventID:        t.EventID,
	}
}

// Done reports that the stream was invalidated and returned its last event.
func (s *Stream) Done() bool { return s.done && s.unread == nil && len(s.frags) == 0 }

// Next returns the next event document, after the user's pipeline; ok false when none is
// available now (the caller may wait for Majority to move past Scanned and call again).
func (s *Stream) Next(ctx context.Context) (bsoncore.Document, bool, error) {
	if s.unread != nil {
		// Unread swapped pos back to before d: swap again, so PBRT counts d returned.
		d := s.unread
		s.unread = nil
		s.pos, s.unreadPos = s.unreadPos, s.pos
		return d, true, nil
	}
	if len(s.frags) > 0 {
		f := s.frags[0]
		s.frags = s.frags[1:]
		s.unreadPos, s.pos = s.pos, &f.tok
		return f.doc, true, nil
	}
	for !s.done {
		if len(s.pending) == 0 {
			if err := s.scan(ctx); err != nil {
				return nil, false, err
			}
			if len(s.pending) == 0 {
				return nil, false, nil
			}
		}
		ev := s.pending[0]
		s.pending = s.pending[1:]
		tok := tokenData(&ev.Token)
		skip := 0
		if s.resume != nil && s.resume.FragmentNum != nil {
			// Resuming after a fragment: the event it belongs to is returned from the next
			// fragment on.
			whole := *s.resume
			whole.FragmentNum = nil
			if resumetoken.Compare(tok, whole) == 0 {
				skip = *s.resume.FragmentNum + 1
				s.resume, s.mustFind = nil, false
			}
		}
		if s.resume != nil {
			c := resumetoken.Compare(tok, *s.resume)
			if c <= 0 {
				if c == 0 {
					s.mustFind = false
				}
				continue
			}
			if s.mustFind {
				id, _ := resumetoken.Make(tok)
				return nil, false, ResumeTokenNotFound(id)
			}
			s.resume = nil
		}
		if ev.Invalidate {
			s.done = true
		}
		prev := s.pos
		s.pos = &tok
		out, err := s.finish(ctx, &ev)
		if err != nil {
			return nil, false, err
		}
		if out == nil {
			if skip > 0 {
				return nil, false, splitMismatch()
			}
			continue
		}
		if eventSize(out) <= MaxEventSize && skip == 0 {
			s.unreadPos = prev
			return out, true, nil
		}
		if !s.cfg.SplitLargeEvents {
			return nil, false, tooLarge(out)
		}
		frags, err := splitEvent(out, tok, skip)
		if err != nil {
			return nil, false, err
		}
		if len(frags) == 0 || eventSize(out) <= MaxEventSize {
			// The event resumed after is not split the same way any more.
			return nil, false, splitMismatch()
		}
		s.frags = frags[1:]
		s.unreadPos, s.pos = prev, &frags[0].tok
		return frags[0].doc, true, nil
	}
	return nil, false, nil
}

func splitMismatch() error {
	return mongoerr.New(mongoerr.ChangeStreamFatalError,
		"Attempted to resume from a split event, but the resumed stream produced a different split. "+
			"Ensure that the pipeline used to resume is the same as the original")
}

// Unread hands back the document Next returned last, which did not fit in the caller's
// batch; the next call to Next returns it again.
func (s *Stream) Unread(d bsoncore.Document) {
	s.unread = d
	s.pos, s.unreadPos = s.unreadPos, s.pos
}

// finish adds the images the spec asks for and runs the user's pipeline; nil when the
// pipeline dropped the event.
func (s *Stream) finish(ctx context.Context, ev *event.Event) (bsoncore.Document, error) {
	d := ev.Doc
	sp := s.cfg.Spec
	var pre bsoncore.Document
	var havePre bool
	needPre := ev.NeedsPreImage && sp.FullDocumentBeforeChange != FullDocOff
	needPost := ev.NeedsPostImage && (sp.FullDocument == FullDocWhenAvailable || sp.FullDocument == FullDocRequired)
	if (needPre || needPost) && s.cfg.PreImage != nil {
		var err error
		if pre, havePre, err = s.cfg.PreImage(ctx, ev); err != nil {
			return nil, err
		}
	}
	var preV, postV bsoncore.Value
	if needPre {
		switch {
		case havePre:
			preV = bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: pre}
		case sp.FullDocumentBeforeChange == FullDocRequired:
			return nil, mongoerr.Newf(mongoerr.NoMatchingDocument,
				"Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: %s",
				docString(ev.Doc))
		default: // whenAvailable: null, as MongoDB's AddPreImage stage
			preV = bsoncore.Value{Type: bsoncore.TypeNull}
		}
	}
	if ev.NeedsPostImage {
		switch sp.FullDocument {
		case FullDocUpdateLookup:
			post, err := s.cfg.LookupPost(ctx, ev)
			if err != nil {
				return nil, err
			}
			postV = docOrNull(post)
		case FullDocWhenAvailable, FullDocRequired:
			var post bsoncore.Document
			if havePre && s.cfg.PostImage != nil {
				var err error
				if post, err = s.cfg.PostImage(pre, ev); err != nil {
					return nil, err
				}
			}
			if post == nil && sp.FullDocument == FullDocRequired {
				return nil, mongoerr.Newf(mongoerr.NoMatchingDocument,
					"Change stream was configured to require a post-image for all update events, but the post-image was not found for event: %s",
					docString(ev.Doc))
			}
			postV = docOrNull(post)
		}
	}
	if preV.Type != 0 || postV.Type != 0 {
		var err error
		if d, err = event.AddImages(d, postV, preV); err != nil {
			return nil, err
		}
	}
	if s.cfg.Pipeline == nil {
		return d, nil
	}
	out, err := s.cfg.Pipeline.Run(ctx, agg.SliceSource([]bsoncore.Document{d}), s.cfg.AggContext)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	r, ok, err := out.Next(ctx)
	if err != nil || !ok {
		return nil, err
	}
	if err := CheckUnmodifiedID(d, r); err != nil {
		return nil, err
	}
	return bytes.Clone(r), nil
}

// PostBatchResumeToken is the token a client resumes from after the documents returned so
// far: the last event consumed, or the high-water mark of the scanned oplog when nothing is
// pending past it.
func (s *Stream) PostBatchResumeToken() bsoncore.Document {
	tok := s.pos
	if len(s.pending) == 0 && len(s.frags) == 0 && s.unread == nil && !s.done && s.resume == nil {
		hw := resumetoken.HighWaterMarkAt(s.next)
		if tok == nil || resumetoken.Compare(hw, *tok) > 0 {
			tok = &hw
		}
	}
	if tok == nil {
		// Resuming from an event token not reached yet: that token still describes where
		// the stream is.
		tok = s.resume
	}
	if tok == nil {
		hw := resumetoken.HighWaterMarkAt(s.next)
		tok = &hw
	}
	return resumetoken.Encode(*tok)
}

// Scanned is the oldest timestamp the stream has not read yet: waiting for the majority
// point to reach it is waiting for something new.
func (s *Stream) Scanned() optime.Timestamp { return s.next }

// scan reads the majority-committed oplog entries from s.next and turns them into events.
func (s *Stream) scan(ctx context.Context) error {
	top := s.cfg.Majority()
	if top < s.next && s.checkedHistory {
		return nil
	}
	ru := s.cfg.Engine.NewRecoveryUnit()
	defer ru.Close()
	if top != 0 {
		if err := ru.SetReadSource(storage.ReadProvided, top); err != nil {
			return err
		}
	}
	c, err := ru.NewCursor(s.cfg.OplogIdent, storage.CursorOptions{})
	if err != nil {
		return fmt.Errorf("change stream: open the oplog: %w", err)
	}
	defer c.Close()
	// The oldest entry must not be newer than where the stream stands: entries in between
	// were truncated (or never existed on this node) and their events are lost.
	if c.First() {
		oldest, err := keyTS(c.Key())
		if err != nil {
			return err
		}
		if oldest > s.next {
			return mongoerr.New(mongoerr.ChangeStreamHistoryLost,
				"Resume of change stream was not possible, as the resume point may no longer be in the oplog.")
		}
	} else if err := c.Err(); err != nil {
		return err
	}
	s.checkedHistory = true
	if top < s.next {
		return nil
	}
	// A transaction's earlier entries (its applyOps chain, or the prepare of its commit) are
	// older than the entry that completes it, so the same snapshot holds them.
	read := func(ot optime.OpTime) (*oplog.Entry, error) {
		fc, err := ru.NewCursor(s.cfg.OplogIdent, storage.CursorOptions{})
		if err != nil {
			return nil, err
		}
		defer fc.Close()
		if !fc.Seek(recordid.Long(int64(ot.TS)).Key()) {
			return nil, fc.Err()
		}
		if got, err := keyTS(fc.Key()); err != nil || got != ot.TS {
			return nil, err
		}
		return oplog.ParseEntry(bytes.Clone(fc.Value()))
	}
	n := 0
	for ok := c.Seek(recordid.Long(int64(s.next)).Key()); ok; ok = c.Next() {
		ts, err := keyTS(c.Key())
		if err != nil {
			return err
		}
		if ts > top {
			break
		}
		e, err := oplog.ParseEntry(bytes.Clone(c.Value()))
		if err != nil {
			return err
		}
		if _, ok := event.NeedsTxnEntries(e); ok {
			chain, err := event.ReadTxnChain(e, read)
			if err != nil {
				return err
			}
			if s.pending, err = event.TransformTxn(s.pending, e, chain, &s.opts); err != nil {
				return err
			}
		} else if s.pending, err = event.Transform(s.pending, e, &s.opts); err != nil {
			return err
		}
		s.next = ts + 1
		if n++; n >= scanEntries || len(s.pending) >= scanEntries {
			return ctx.Err()
		}
	}
	if err := c.Err(); err != nil {
		return err
	}
	s.next = max(s.next, top+1)
	return nil
}

func keyTS(k []byte) (optime.Timestamp, error) {
	id, err := recordid.FromKey(k)
	if err != nil {
		return 0, fmt.Errorf("change stream: oplog key: %w", err)
	}
	return optime.Timestamp(id.Int64()), nil
}

func docOrNull(d bsoncore.Document) bsoncore.Value {
	if d == nil {
		return bsoncore.Value{Type: bsoncore.TypeNull}
	}
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d}
}

func docString(d bsoncore.Document) string {
	if d == nil {
		return "{}"
	}
	return d.String()
}
