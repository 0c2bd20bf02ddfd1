package changestream

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/changestream/resumetoken"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// The fullDocument and fullDocumentBeforeChange modes.
const (
	FullDocDefault       = "default"
	FullDocUpdateLookup  = "updateLookup"
	FullDocWhenAvailable = "whenAvailable"
	FullDocRequired      = "required"
	FullDocOff           = "off"
)

// Spec is a parsed $changeStream stage (document_source_change_stream.idl).
type Spec struct {
	// ResumeAfter and StartAfter are the decoded resume tokens (nil when absent).
	ResumeAfter, StartAfter *resumetoken.Data
	// StartAtOperationTime is the inclusive start time (0 when absent).
	StartAtOperationTime optime.Timestamp

	FullDocument             string
	FullDocumentBeforeChange string

	AllChangesForCluster     bool
	ShowMigrationEvents      bool
	AllowToRunOnConfigDB     bool
	AllowToRunOnSystemNS     bool
	ShowExpandedEvents       bool
	ShowSystemEvents         bool
	ShowRawUpdateDescription bool
}

// ResumeToken is the token the stream resumes from (startAfter, else resumeAfter), nil when
// it starts at a time.
func (s *Spec) ResumeToken() *resumetoken.Data {
	if s.StartAfter != nil {
		return s.StartAfter
	}
	return s.ResumeAfter
}

// ParseSpec parses the value of a $changeStream stage with MongoDB's IDL errors.
func ParseSpec(v bsoncore.Value) (*Spec, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.Location50808, "$changeStream stage expects a document as argument")
	}
	s := &Spec{FullDocument: FullDocDefault, FullDocumentBeforeChange: FullDocOff}
	els, err := d.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid $changeStream spec: %v", err)
	}
	seen := map[string]bool{}
	for _, el := range els {
		key, val := el.Key(), el.Value()
		if seen[key] {
			return nil, mongoerr.Newf(mongoerr.Location40413, "BSON field '$changeStream.%s' is a duplicate field", key)
		}
		seen[key] = true
		switch key {
		case "resumeAfter", "startAfter":
			tok, err := resumetoken.DecodeOption(key, val)
			if err != nil {
				return nil, err
			}
			if key == "resumeAfter" {
				s.ResumeAfter = &tok
			} else {
				s.StartAfter = &tok
			}
		case "startAtOperationTime":
			t, i, ok := val.TimestampOK()
			if !ok {
				return nil, specType(key, val.Type, "timestamp")
			}
			s.StartAtOperationTime = optime.MakeTimestamp(t, i)
		case "fullDocument":
			str, ok := val.StringValueOK()
			if !ok {
				return nil, specType(key, val.Type, "string")
			}
			switch str {
			case FullDocDefault, FullDocUpdateLookup, FullDocWhenAvailable, FullDocRequired:
			default:
				return nil, specEnum(key, str)
			}
			s.FullDocument = str
		case "fullDocumentBeforeChange":
			str, ok := val.StringValueOK()
			if !ok {
				return nil, specType(key, val.Type, "string")
			}
			switch str {
			case FullDocOff, FullDocWhenAvailable, FullDocRequired:
			default:
				return nil, specEnum(key, str)
			}
			s.FullDocumentBeforeChange = str
		case "allChangesForCluster", "showMigrationEvents", "allowToRunOnConfigDB", "allowToRunOnSystemNS",
			"showExpandedEvents", "showSystemEvents", "showRawUpdateDescription":
			b, ok := val.BooleanOK()
			if !ok {
				return nil, specType(key, val.Type, "bool")
			}
			*s.flag(key) = b
		case "$_generateV2ResumeTokens":
			// mongos asks shards for v2 tokens; they are the only kind made here.
			if _, ok := val.BooleanOK(); !ok {
				return nil, specType(key, val.Type, "bool")
			}
		default:
			return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field '$changeStream.%s' is an unknown field.", key)
		}
	}
	return s, nil
}

func (s *Spec) flag(key string) *bool {
	switch key {
	case "allChangesForCluster":
		return &s.AllChangesForCluster
	case "showMigrationEvents":
		return &s.ShowMigrationEvents
	case "allowToRunOnConfigDB":
		return &s.AllowToRunOnConfigDB
	case "allowToRunOnSystemNS":
		return &s.AllowToRunOnSystemNS
	case "showExpandedEvents":
		return &s.ShowExpandedEvents
	case "showSystemEvents":
		return &s.ShowSystemEvents
	default:
		return &s.ShowRawUpdateDescription
	}
}

func specType(field string, got bsoncore.Type, want string) error {
	return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '$changeStream.%s' is the wrong type '%s', expected type '%s'",
		field, bsonutil.TypeName(got), want)
}

func specEnum(field, got string) error {
	return mongoerr.Newf(mongoerr.BadValue, "Enumeration value '%s' for field '$changeStream.%s' is not a valid value.", got, field)
}

// Check is MongoDB's assertIsLegalSpecification for a stream opened on db (coll "" for a
// database or cluster stream) by a replica-set member (router false) or a router.
func (s *Spec) Check(db, coll string, router bool) error {
	ns := db + "." + coll
	if coll == "" {
		ns = db + ".$cmd.aggregate"
	}
	if s.AllChangesForCluster && (db != "admin" || coll != "") {
		return mongoerr.Newf(mongoerr.InvalidOptions,
			"A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name; found %s", ns)
	}
	banned := db == "local" || (db == "config" && !s.AllowToRunOnConfigDB)
	if db == "admin" {
		banned = !s.AllChangesForCluster
	}
	if banned {
		return mongoerr.Newf(mongoerr.InvalidNamespace, "$changeStream may not be opened on the internal %s database", db)
	}
	if strings.HasPrefix(coll, "system.") && (!s.AllowToRunOnSystemNS || router) {
		suffix := ""
		if s.AllowToRunOnSystemNS {
			suffix = " through mongos"
		}
		return mongoerr.Newf(mongoerr.InvalidNamespace, "$changeStream may not be opened on the internal %s collection%s", ns, suffix)
	}
	if router && s.ShowMigrationEvents {
		return mongoerr.New(mongoerr.Location31123, "Change streams from mongos may not show migration events")
	}
	if s.ResumeAfter != nil && s.StartAfter != nil {
		return mongoerr.New(mongoerr.Location50865, "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage")
	}
	tok := s.ResumeToken()
	if s.StartAtOperationTime != 0 && tok != nil {
		return mongoerr.New(mongoerr.Location40674, "Only one type of resume option is allowed, but multiple were found")
	}
	if s.ResumeAfter != nil && s.ResumeAfter.FromInvalidate {
		return mongoerr.New(mongoerr.InvalidResumeToken,
			"Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification")
	}
	if tok != nil && tok.UUID == nil && coll != "" && !tok.IsHighWaterMark() {
		return mongoerr.New(mongoerr.InvalidResumeToken,
			"Attempted to resume a single-collection stream, but the resume token does not include a UUID")
	}
	return nil
}
