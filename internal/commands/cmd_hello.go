package commands

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/wire"
)

func addHello(r *service.Registry) {
	add(r, &service.Command{
		Name:             "hello",
		Aliases:          []string{"isMaster", "ismaster"},
		Handler:          runHello,
		Help:             "Check if this server is primary for a replica set\n{ hello : 1 }",
		Secondary:        service.SecondaryAlways,
		AllowedOnOpQuery: true,
	})
}

// Wire versions: MongoDB 7.0.
const (
	MinWireVersion = 0
	MaxWireVersion = 21
)

// TopologyCounter is a standalone's topologyVersion counter: its topology never changes, so it
// stays 0. A replica-set member's counter is its replication coordinator's
// (CurrentTopologyVersion).
const TopologyCounter int64 = 0

// maxClientMetadataSize and maxAppNameSize are MongoDB's limits on hello.client.
const (
	maxClientMetadataSize = 512
	maxAppNameSize        = 128
)

func runHello(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	if err := helloClientMetadata(env, cmd); err != nil {
		return nil, err
	}
	if err := helloNegotiateCompression(env, cmd); err != nil {
		return nil, err
	}
	if err := helloAwait(ctx, env, cmd); err != nil {
		return nil, err
	}
	if v := lookup(cmd, "saslSupportedMechs"); v.Type != 0 {
		// mongod answers with the user's mechanisms, and omits the field when the user does not
		// exist. There are no users until authentication lands, so only validate the name.
		s, ok := v.StringValueOK()
		if !ok {
			return nil, typeMismatch("hello", "saslSupportedMechs", v.Type, "string")
		}
		if !strings.Contains(s, ".") {
			return nil, mongoerr.Newf(mongoerr.BadValue, "UserName must contain a '.' separated database.user pair")
		}
	}

	st := env.State
	b := make([]byte, 0, 512)
	idx, b := bsoncore.AppendDocumentStart(b)
	if truthy(lookup(cmd, "helloOk")) {
		b = bsoncore.AppendBooleanElement(b, "helloOk", true)
	}
	// The legacy names answer with the legacy field; drivers read whichever matches what they sent.
	switch {
	case st.Repl != nil:
		b = appendHelloRepl(b, env, st.Repl)
	case env.Name == "hello":
		b = bsoncore.AppendBooleanElement(b, "isWritablePrimary", true)
	default:
		b = bsoncore.AppendBooleanElement(b, "ismaster", true)
	}
	counter, _ := CurrentTopologyVersion(st)
	tv := bsoncore.NewDocumentBuilder().AppendObjectID("processId", st.ProcessID).
		AppendInt64("counter", counter).Build()
	b = bsoncore.AppendDocumentElement(b, "topologyVersion", tv)
	b = bsoncore.AppendInt32Element(b, "maxBsonObjectSize", wire.MaxBSONObjectSize)
	b = bsoncore.AppendInt32Element(b, "maxMessageSizeBytes", wire.MaxMessageSizeBytes)
	b = bsoncore.AppendInt32Element(b, "maxWriteBatchSize", wire.MaxWriteBatchSize)
	b = bsoncore.AppendDateTimeElement(b, "localTime", time.Now().UnixMilli())
	b = bsoncore.AppendInt32Element(b, "logicalSessionTimeoutMinutes", int32(st.Params.Int("localLogicalSessionTimeoutMinutes")))
	b = bsoncore.AppendInt64Element(b, "connectionId", env.Conn.ID)
	b = bsoncore.AppendInt32Element(b, "minWireVersion", MinWireVersion)
	b = bsoncore.AppendInt32Element(b, "maxWireVersion", MaxWireVersion)
	b = bsoncore.AppendBooleanElement(b, "readOnly", false)
	if cs := env.Conn.Compressors(); len(cs) > 0 && lookup(cmd, "compression").Type != 0 {
		b = appendStrings(b, "compression", cs)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}

// helloClientMetadata stores hello.client on the first hello of a connection and rejects it
// on later ones: client metadata is immutable for a connection's life.
func helloClientMetadata(env *service.Env, cmd bsoncore.Document) error {
	v := lookup(cmd, "client")
	return env.Conn.UpdateMetadata(func(m *service.ClientMetadata) error {
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
			return typeMismatch("hello", "client", v.Type, "object")
		}
		appName, err := validateClientMetadata(meta)
		if err != nil {
			return err
		}
		m.Set = true
		m.Doc = append(bsoncore.Document(nil), meta...)
		m.AppName = appName
		if internal := lookup(cmd, "internalClient"); internal.Type != 0 {
			m.Internal = true
		}
		return nil
	})
}

// validateClientMetadata checks the document MongoDB's ClientMetadata::parse checks and
// returns application.name.
func validateClientMetadata(meta bsoncore.Document) (string, error) {
	if len(meta) > maxClientMetadataSize {
		return "", mongoerr.Newf(mongoerr.ClientMetadataDocumentTooLarge,
			"The client metadata document must be less then or equal to %d bytes", maxClientMetadataSize)
	}
	var appName string
	if app := lookup(meta, "application"); app.Type != 0 {
		ad, ok := app.DocumentOK()
		if !ok {
			return "", mongoerr.New(mongoerr.TypeMismatch, "The 'application' field is required to be a BSON document in the client metadata document")
		}
		if n := lookup(ad, "name"); n.Type != 0 {
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
		d, ok := lookup(meta, req.doc).DocumentOK()
		if !ok {
			return "", mongoerr.Newf(mongoerr.ClientMetadataMissingField,
				"Missing required sub-document '%s' in the client metadata document", req.doc)
		}
		if _, ok := lookup(d, req.field).StringValueOK(); !ok {
			return "", mongoerr.Newf(mongoerr.ClientMetadataMissingField,
				"Missing required field '%s.%s' in the client metadata document", req.doc, req.field)
		}
	}
	return appName, nil
}

// helloNegotiateCompression records the compressors the client asked for that the server has
// enabled; the server compresses replies only to requests compressed with one of them.
func helloNegotiateCompression(env *service.Env, cmd bsoncore.Document) error {
	if lookup(cmd, "compression").Type == 0 {
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

// helloAwait implements the awaitable hello (streaming SDAM): a client that knows the current
// topologyVersion waits up to maxAwaitTimeMS for it to change. With exhaustAllowed, the reply
// streams: the server answers again each time the wait ends, without new requests.
func helloAwait(ctx context.Context, env *service.Env, cmd bsoncore.Document) error {
	tvv, mav := lookup(cmd, "topologyVersion"), lookup(cmd, "maxAwaitTimeMS")
	switch {
	case tvv.Type == 0 && mav.Type == 0:
		return nil
	case mav.Type == 0:
		return mongoerr.New(codeTopologyVersionWithoutAwait, "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'")
	case tvv.Type == 0:
		return mongoerr.New(codeAwaitWithoutTopologyVersion, "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'")
	}
	maxAwait, err := intArg("hello", "maxAwaitTimeMS", mav)
	if err != nil {
		return err
	}
	if maxAwait < 0 {
		return mongoerr.New(codeBadMaxAwaitTimeMS, "maxAwaitTimeMS must be a non-negative integer")
	}
	tv, ok := tvv.DocumentOK()
	if !ok {
		return typeMismatch("hello", "topologyVersion", tvv.Type, "object")
	}
	pid, ok := lookup(tv, "processId").ObjectIDOK()
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'hello.topologyVersion.processId' is missing or not an objectId")
	}
	counter, err := intArg("hello", "topologyVersion.counter", lookup(tv, "counter"))
	if err != nil {
		return err
	}
	env.Exhaust = env.ExhaustAllowed
	current, changed := CurrentTopologyVersion(env.State)
	if pid != env.State.ProcessID || counter < current {
		return nil // the client's view is stale: answer at once
	}
	if counter > current {
		return mongoerr.Newf(codeTopologyVersionFromFuture,
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
