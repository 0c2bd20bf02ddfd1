package router

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestDbgBig(t *testing.T) {
	sc := startShardedCluster(t)
	big := make([]byte, 1<<20)
	var docs bson.A
	for i := 0; i < 40; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "pad", Value: bson.Binary{Data: big}}})
	}
	res, err := sc.router.Database("app").Collection("s").InsertMany(context.Background(), docs)
	t.Logf("%v %v", res != nil, err)
	t.Logf("%v", sc.ids(t, 1, "app", "s"))
	n, _ := sc.shards[1].Client.Database("app").Collection("s").CountDocuments(context.Background(), bson.D{})
	t.Logf("count %d", n)
}
