package commands

// setClusterParameter / getClusterParameter (MongoDB's cluster server parameters), for the one
// cluster parameter humongod has: changeStreamOptions, the time-based expiry of change stream
// pre-images (internal/changestream/images). A replica set stores a parameter in
// config.clusterParameters under its name ({_id, clusterParameterTime, <value's fields>}), a
// replicated write, so every member's pre-image remover reads the same value; a standalone
// has none (IllegalOperation), as mongod.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/changestream/images"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/service"
)

// clusterParametersNS holds the cluster parameters of a replica set.
const clusterParametersNS = "config.clusterParameters"

func addClusterParameters(r *service.Registry) {
	add(r, &service.Command{
		Name:      "setClusterParameter",
		Auth:      service.AuthOnCluster(auth.SetClusterParameter),
		Handler:   runSetClusterParameter,
		Help:      "Set cluster parameter on replica set or node",
		AdminOnly: true,
		Writes:    true,
	})
	add(r, &service.Command{
		Name:      "getClusterParameter",
		Auth:      service.AuthOnCluster(auth.GetClusterParameter),
		Handler:   runGetClusterParameter,
		Help:      "Get in-memory cluster parameter value(s) from this node",
		AdminOnly: true,
		Secondary: service.SecondaryAlways,
	})
}

func runSetClusterParameter(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const c = "setClusterParameter"
	if err := checkStrict(cmd, c); err != nil {
		return nil, err
	}
	arg := lookup(cmd, c)
	param, ok := arg.DocumentOK()
	if !ok {
		return nil, typeMismatch(c, c, arg.Type, "object")
	}
	elems, err := param.Elements()
	if err != nil || len(elems) != 1 {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "Cluster parameter value must be an object with exactly one parameter")
	}
	name := elems[0].Key()
	if name != images.OptionsParameter {
		return nil, mongoerr.Newf(mongoerr.NoSuchKey, "Unknown Cluster Parameter %s", name)
	}
	value, err := images.ParseOptions(elems[0].Value())
	if err != nil {
		return nil, err
	}
	if env.State.Repl == nil || env.State.DB == nil {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "setClusterParameter cannot be run on standalones")
	}
	db := env.State.DB
	ts := env.State.Concern.Clock.ClusterTime()
	stored := doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "_id", name)
		b = bsoncore.AppendTimestampElement(b, "clusterParameterTime", ts.Secs(), ts.Inc())
		vs, _ := value.Elements()
		for _, e := range vs {
			b = append(b, e...)
		}
		return b
	})
	op := db.NewOp(ctx)
	defer op.Close()
	err = op.WriteCollection(ctx, clusterParametersNS, true, func(coll *index.Collection) error {
		id := stored.Lookup("_id")
		rid, old, found, err := coll.FindByID(op.RU, id)
		if err != nil {
			return err
		}
		if found {
			return coll.UpdateDocument(op.RU, rid, append(bsoncore.Document(nil), old...), stored)
		}
		_, err = coll.InsertDocument(op.RU, stored)
		return err
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runGetClusterParameter(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const c = "getClusterParameter"
	if err := checkStrict(cmd, c); err != nil {
		return nil, err
	}
	var names []string
	switch v := lookup(cmd, c); v.Type {
	case bsoncore.TypeString:
		if s := v.StringValue(); s == "*" {
			names = []string{images.OptionsParameter}
		} else {
			names = []string{s}
		}
	case bsoncore.TypeArray:
		vals, _ := v.Array().Values()
		for _, x := range vals {
			s, ok := x.StringValueOK()
			if !ok {
				return nil, typeMismatch(c, c, x.Type, "string")
			}
			names = append(names, s)
		}
	default:
		return nil, typeMismatch(c, c, v.Type, "string", "array")
	}
	for _, n := range names {
		if n != images.OptionsParameter {
			return nil, mongoerr.Newf(mongoerr.NoSuchKey, "Unknown Cluster Parameter %s", n)
		}
	}
	var params []bsoncore.Document
	for range names {
		d, err := changeStreamOptionsDoc(ctx, env.State.DB)
		if err != nil {
			return nil, err
		}
		params = append(params, d)
	}
	return doc(func(b []byte) []byte {
		ai, b := bsoncore.AppendArrayElementStart(b, "clusterParameters")
		for i, p := range params {
			b = bsoncore.AppendDocumentElement(b, itoa(int64(i)), p)
		}
		b, _ = bsoncore.AppendArrayEnd(b, ai)
		return b
	}), nil
}

// changeStreamOptionsDoc is the stored changeStreamOptions parameter, or its default
// ({_id, clusterParameterTime: Timestamp(0, 0), preAndPostImages: {expireAfterSeconds: "off"}}).
func changeStreamOptionsDoc(ctx context.Context, db *operation.DB) (bsoncore.Document, error) {
	var found bsoncore.Document
	if db != nil {
		err := db.ScanDocuments(ctx, clusterParametersNS, func(d bsoncore.Document) bool {
			if id, _ := d.Lookup("_id").StringValueOK(); id == images.OptionsParameter {
				found = append(bsoncore.Document(nil), d...)
				return false
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	if found != nil {
		return found, nil
	}
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "_id", images.OptionsParameter)
		b = bsoncore.AppendTimestampElement(b, "clusterParameterTime", 0, 0)
		vs, _ := images.DefaultOptions.Elements()
		for _, e := range vs {
			b = append(b, e...)
		}
		return b
	}), nil
}

// StartPreImagesRemover starts the node's expired change stream pre-images remover
// (images.Remover over st.DB, reading changeStreamOptions from config.clusterParameters
// before each pass) and returns the function that stops it and waits for it. cmd/humongod
// starts it on replica-set members; a standalone records no pre-images.
func StartPreImagesRemover(ctx context.Context, st *service.State) (stop func()) {
	if st == nil || st.DB == nil {
		return func() {}
	}
	db := st.DB
	r := &images.Remover{DB: db, Log: st.Logger,
		ExpireAfterSeconds: func(ctx context.Context) (int64, bool, error) {
			d, err := changeStreamOptionsDoc(ctx, db)
			if err != nil {
				return 0, false, err
			}
			n, on := images.ExpireAfterSeconds(d)
			return n, on, nil
		}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
