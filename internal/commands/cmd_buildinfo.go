package commands

import (
	"context"
	"runtime"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/wire"
)

func init() {
	register(&Command{
		Name:      "buildInfo",
		Aliases:   []string{"buildinfo"},
		Handler:   runBuildInfo,
		Help:      "get version #, etc.\n{ buildinfo:1 }",
		Secondary: SecondaryAlways,
	})
}

// Version is the MongoDB version Humongo reports; drivers gate features on it.
const (
	Version    = "7.0.0-humongo"
	GitVersion = "humongo"
)

// VersionArray is Version as buildInfo.versionArray.
var VersionArray = [4]int32{7, 0, 0, 0}

func runBuildInfo(context.Context, *Env, bsoncore.Document) (bsoncore.Document, error) {
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "version", Version)
		b = bsoncore.AppendStringElement(b, "gitVersion", GitVersion)
		b = appendStrings(b, "modules", nil)
		b = bsoncore.AppendStringElement(b, "allocator", "go")
		b = bsoncore.AppendStringElement(b, "javascriptEngine", "none")
		b = bsoncore.AppendStringElement(b, "sysInfo", "deprecated")
		idx, b2 := bsoncore.AppendArrayElementStart(b, "versionArray")
		for i, v := range VersionArray {
			b2 = bsoncore.AppendInt32Element(b2, itoa(int64(i)), v)
		}
		b, _ = bsoncore.AppendArrayEnd(b2, idx)
		b = bsoncore.AppendDocumentElement(b, "openssl", bsoncore.NewDocumentBuilder().
			AppendString("running", "disabled").AppendString("compiled", "disabled").Build())
		b = bsoncore.AppendDocumentElement(b, "buildEnvironment", bsoncore.NewDocumentBuilder().
			AppendString("distarch", runtime.GOARCH).AppendString("target_arch", runtime.GOARCH).
			AppendString("target_os", runtime.GOOS).AppendString("cc", runtime.Version()).Build())
		b = bsoncore.AppendInt32Element(b, "bits", 64)
		b = bsoncore.AppendBooleanElement(b, "debug", false)
		b = bsoncore.AppendInt32Element(b, "maxBsonObjectSize", wire.MaxBSONObjectSize)
		b = appendStrings(b, "storageEngines", []string{"pebble"})
		return b
	}), nil
}
