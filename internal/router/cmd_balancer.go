package router

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

// runBalancerStatus is mongos's BalancerStatusCmd: the config server's
// _configsvrBalancerStatus reply passed through (CommandHelpers::
// filterCommandReplyForPassthrough drops ok and the gossiped times). No balancer runs yet
// (issue 13): the config server reports no round and the mode from config.settings.
func runBalancerStatus(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	raw, err := c.config.RunCommand(ctx, "admin", bson.D{{Key: "_configsvrBalancerStatus", Value: 1}}, nil)
	if err != nil {
		return nil, remoteError(err)
	}
	elems, err := bsoncore.Document(raw).Elements()
	if err != nil {
		return nil, err
	}
	b := bsoncore.NewDocumentBuilder()
	for _, e := range elems {
		switch k := e.Key(); {
		case k == "ok", k == "operationTime", k == "errmsg", k == "code", k == "codeName", strings.HasPrefix(k, "$"):
		default:
			b.AppendValue(k, e.Value())
		}
	}
	return b.Build(), nil
}
