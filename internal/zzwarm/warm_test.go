package zzwarm

import (
	_ "github.com/cockroachdb/apd/v3"
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/cockroachdb/pebble/v2/vfs"
	_ "github.com/dlclark/regexp2"
	_ "github.com/golang/snappy"
	_ "github.com/klauspost/compress/zstd"
	_ "go.mongodb.org/mongo-driver/v2/mongo"
	_ "go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	_ "go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
	_ "gopkg.in/yaml.v3"
	_ "github.com/anishathalye/porcupine"
	_ "golang.org/x/text/collate"
)
