package commands

import (
	"humongo/internal/changestream"
	"humongo/internal/service"
)

// csImages gives a stream the node's pre-images (fullDocumentBeforeChange, and fullDocument
// whenAvailable/required).
func csImages(env *service.Env, cfg *changestream.Config) {}
