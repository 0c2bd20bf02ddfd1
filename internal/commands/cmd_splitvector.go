package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
)

func splitVectorCommand() *service.Command {
	return &service.Command{
		Name:    "splitVector",
		Auth:    service.AuthOnFullNS(auth.SplitVector),
		Handler: runSplitVector,
		Help: "Internal command.\nexamples:\n  { splitVector : \"blog.post\" , keyPattern:{x:1} , min:{x:10} , max:{x:20}, maxChunkSize:200 }\n" +
			"  maxChunkSize unit in MBs\n  May optionally specify 'maxSplitPoints' and 'maxChunkObjects' to avoid traversing the whole chunk\n  \n" +
			"  { splitVector : \"blog.post\" , keyPattern:{x:1} , min:{x:10} , max:{x:20}, force: true }\n" +
			"  'force' will produce one split point even if data is small; defaults to false\nNOTE: This command may take a while to run",
		Secondary: service.SecondaryNever,
	}
}

// runSplitVector is splitVector ({splitVector: ns, keyPattern, min, max, maxChunkSize |
// maxChunkSizeBytes, maxSplitPoints, maxChunkObjects, force}): the split points of a range,
// from a scan of the shard key index (ddl.SplitVector). Any data node answers it, as mongod
// does; it reads and writes nothing else.
func runSplitVector(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	req, err := ddl.ParseSplitVector(cmd)
	if err != nil {
		return nil, err
	}
	keys, err := ddl.SplitVector(ctx, ddl.RunFunc(internalRunner(env.State, env.Registry)), env.State.Logger, req)
	if err != nil {
		return nil, err
	}
	arr := bsoncore.NewArrayBuilder()
	for _, k := range keys.Keys {
		arr.AppendDocument(k)
	}
	return bsoncore.NewDocumentBuilder().AppendArray("splitKeys", arr.Build()).Build(), nil
}
