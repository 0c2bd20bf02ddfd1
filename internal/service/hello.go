package service

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/vclock"
	"humongo/internal/wire"
)

// Wire versions: MongoDB 7.0.
const (
	MinWireVersion = 0
	MaxWireVersion = 21
)

// maxClientMetadataSize and maxAppNameSize are MongoDB's limits on hello.client.
const (
	maxClientMetadataSize = 512
	maxAppNameSize        = 128
)

// HelloHandshake is the part of hello every role does alike: it fixes the connection's client
// metadata on the first hello (and refuses to change it later), negotiates compression and
// validates saslSupportedMechs.
func HelloHandshake(env *Env, cmd bsoncore.Document) error {
	if err := helloClientMetadata(env, cmd); err != nil {
		return err
	}
	if err := helloNegotiateCompression(env, cmd); err != nil {
		return err
	}
	if v := lookupValue(cmd, "saslSupportedMechs"); v.Type != 0 {
		// AppendHelloLimits answers with the user's mechanisms (none when it does not exist).
		s, ok := v.StringValueOK()
		if !ok {
			return mongoerr.Newf(mongoerr.TypeMismatch,
				"BSON field 'hello.saslSupportedMechs' is the wrong type '%s', expected type 'string'", bsonutil.TypeName(v.Type))
		}
		if !strings.Contains(s, ".") {
			return mongoerr.Newf(mongoerr.BadValue, "UserName must contain a '.' separated database.user pair")
		}
	}
	return nil
}

// AppendHelloLimits appends hello's limits and versions, the same on every role:
// maxBsonObjectSize ... maxWireVersion, readOnly, and the negotiated compression.
func AppendHelloLimits(ctx context.Context, b []byte, env *Env, cmd bsoncore.Document) []byte {
	b = bsoncore.AppendInt32Element(b, "maxBsonObjectSize", wire.MaxBSONObjectSize)
	b = bsoncore.AppendInt32Element(b, "maxMessageSizeBytes", wire.MaxMessageSizeBytes)
	b = bsoncore.AppendInt32Element(b, "maxWriteBatchSize", wire.MaxWriteBatchSize)
	b = bsoncore.AppendDateTimeElement(b, "localTime", time.Now().UnixMilli())
	b = bsoncore.AppendInt32Element(b, "logicalSessionTimeoutMinutes", int32(env.State.Params.Int("localLogicalSessionTimeoutMinutes")))
	// mongod appends it with BSONObjBuilder::appendNumber: int32 while it fits in 30 bits.
	if id := env.Conn.ID; id > -(1<<30) && id < 1<<30 {
		b = bsoncore.AppendInt32Element(b, "connectionId", int32(id))
	} else {
		b = bsoncore.AppendInt64Element(b, "connectionId", id)
	}
	b = bsoncore.AppendInt32Element(b, "minWireVersion", MinWireVersion)
	b = bsoncore.AppendInt32Element(b, "maxWireVersion", MaxWireVersion)
	b = bsoncore.AppendBooleanElement(b, "readOnly", false)
	if cs := env.Conn.Compressors(); len(cs) > 0 && lookupValue(cmd, "compression").Type != 0 {
		b = appendStrings(b, "compression", cs)
	}
	return appendHelloAuth(ctx, b, env, cmd)
}

// helloClientMetadata stores hello.client on the first hello of a connection and rejects it
// on later ones: client metadata is immutable for a connection's life.
func helloClientMetadata(env *Env, cmd bsoncore.Document) error {
	v := lookupValue(cmd, "client")
	return env.Conn.UpdateMetadata(func(m *ClientMetadata) error {
		if m.Set {
			if v.Type != 0 {
				return mongoerr.New(mongoerr.ClientMetadataCannotBeMutated,
					"The client metadata document may only be sent in the first hello")
			}
			return nil
		}
		if v.Type == 0 {
			m.Set = true
			return nil
		}
		meta, ok := v.DocumentOK()
		if !ok {
			return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'hello.client' is the wrong type '%s', expected type 'object'", bsonutil.TypeName(v.Type))
		}
		appName, err := ValidateClientMetadata(meta)
		if err != nil {
			return err
		}
		m.Set = true
		m.Doc = append(bsoncore.Document(nil), meta...)
		m.AppName = appName
		if internal := lookupValue(cmd, "internalClient"); internal.Type != 0 {
			m.Internal = true
		}
		if name, _ := meta.Lookup("driver", "name").StringValueOK(); strings.Contains(name, vclock.MemberDriverName) {
			m.Internal = true // a member's internal client (vclock.MemberDriverName)
		}
		return nil
	})
}

// ValidateClientMetadata checks the document MongoDB's ClientMetadata::parse checks and
// returns application.name.
func ValidateClientMetadata(meta bsoncore.Document) (string, error) {
	if len(meta) > maxClientMetadataSize {
		return "", mongoerr.Newf(mongoerr.ClientMetadataDocumentTooLarge,
			"The client metadata document must be less then or equal to %d bytes", maxClientMetadataSize)
	}
	var appName string
	if app := lookupValue(meta, "application"); app.Type != 0 {
		ad, ok := app.DocumentOK()
		if !ok {
			return "", mongoerr.New(mongoerr.TypeMismatch, "The 'application' field is required to be a BSON document in the client metadata document")
		}
		if n := lookupValue(ad, "name"); n.Type != 0 {
			s, ok := n.StringValueOK()
			if !ok {
				return "", mongoerr.New(mongoerr.TypeMismatch, "The 'name' field is required to be a string in the client metadata document")
			}
			if len(s) > maxAppNameSize {
				return "", mongoerr.Newf(mongoerr.ClientMetadataAppNameTooLarge,
					"The 'application.name' field must be less then or equal to %d bytes in the client metadata document", maxAppNameSize)
			}
			appName = s
		}
	}
	for _, req := range []struct{ doc, field string }{{"driver", "name"}, {"driver", "version"}, {"os", "type"}} {
		d, ok := lookupValue(meta, req.doc).DocumentOK()
		if !ok {
			return "", mongoerr.Newf(mongoerr.ClientMetadataMissingField,
				"Missing required sub-document '%s' in the client metadata document", req.doc)
		}
		if _, ok := lookupValue(d, req.field).StringValueOK(); !ok {
			return "", mongoerr.Newf(mongoerr.ClientMetadataMissingField,
				"Missing required field '%s.%s' in the client metadata document", req.doc, req.field)
		}
	}
	return appName, nil
}

// helloNegotiateCompression records the compressors the client asked for that the server has
// enabled; the server compresses replies only to requests compressed with one of them.
func helloNegotiateCompression(env *Env, cmd bsoncore.Document) error {
	if lookupValue(cmd, "compression").Type == 0 {
		return nil
	}
	var enabled []wire.Compressor
	for _, n := range env.State.Compressors {
		if c, ok := wire.CompressorByName(n); ok {
			enabled = append(enabled, c)
		}
	}
	cs, err := wire.NegotiateHello(cmd, enabled)
	if err != nil {
		return err
	}
	env.Conn.SetCompressors(wire.CompressorNames(cs))
	return nil
}

// HelloAwait implements the awaitable hello (streaming SDAM): a client that knows the current
// topologyVersion waits up to maxAwaitTimeMS for it to change. topology returns the role's
// counter and a channel closed when it next moves (nil: it never does). With exhaustAllowed, the reply
// streams: the server answers again each time the wait ends, without new requests.
func HelloAwait(ctx context.Context, env *Env, cmd bsoncore.Document, topology func() (counter int64, changed <-chan struct{})) error {
	tvv, mav := lookupValue(cmd, "topologyVersion"), lookupValue(cmd, "maxAwaitTimeMS")
	switch {
	case tvv.Type == 0 && mav.Type == 0:
		return nil
	case mav.Type == 0:
		return mongoerr.New(mongoerr.Location31368, "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'")
	case tvv.Type == 0:
		return mongoerr.New(mongoerr.Location31372, "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'")
	}
	maxAwait, err := helloInt("maxAwaitTimeMS", mav)
	if err != nil {
		return err
	}
	if maxAwait < 0 {
		return mongoerr.New(mongoerr.Location51760, "maxAwaitTimeMS must be a non-negative integer")
	}
	tv, ok := tvv.DocumentOK()
	if !ok {
		return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'hello.topologyVersion' is the wrong type '%s', expected type 'object'", bsonutil.TypeName(tvv.Type))
	}
	pid, ok := lookupValue(tv, "processId").ObjectIDOK()
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'hello.topologyVersion.processId' is missing or not an objectId")
	}
	counter, err := helloInt("topologyVersion.counter", lookupValue(tv, "counter"))
	if err != nil {
		return err
	}
	env.Exhaust = env.ExhaustAllowed
	current, changed := topology()
	if pid != env.State.ProcessID || counter < current {
		return nil // the client's view is stale: answer at once
	}
	if counter > current {
		return mongoerr.Newf(mongoerr.Location31382,
			"Received a topology version with counter: %d which is greater than the server topology version counter: %d", counter, current)
	}
	t := time.NewTimer(time.Duration(maxAwait) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-changed: // a replica-set state change: answer with the new topology now
	case <-env.State.ShutdownStarted:
		// Shutting down changes what clients should think of us; answer now and let the
		// connection close behind the reply.
		env.Exhaust = false
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// helloInt parses an integer field of hello as IDL "safeInt64" fields are parsed.
func helloInt(field string, v bsoncore.Value) (int64, error) {
	switch v.Type {
	case bsoncore.TypeInt32:
		return int64(v.Int32()), nil
	case bsoncore.TypeInt64:
		return v.Int64(), nil
	case bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		f, ok := AsFloat(v)
		if ok && f == float64(int64(f)) {
			return int64(f), nil
		}
		return 0, mongoerr.Newf(mongoerr.BadValue, "BSON field 'hello.%s' must be an integer", field)
	}
	return 0, mongoerr.Newf(mongoerr.TypeMismatch,
		"BSON field 'hello.%s' is the wrong type '%s', expected types '[long, int, decimal, double']", field, bsonutil.TypeName(v.Type))
}
