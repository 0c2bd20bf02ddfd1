package commands

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/txn/lsc"
)

// appendLsid appends {id: UUID} under key.
func appendLsid(b []byte, key string, id lsc.UUID) []byte {
	return bsoncore.AppendDocumentElement(b, key,
		bsoncore.NewDocumentBuilder().AppendBinary("id", 4, id[:]).Build())
}
