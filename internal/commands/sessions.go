package commands

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
)

// parseLsidArray parses the array argument of endSessions/refreshSessions/killSessions.
func parseLsidArray(cmdName string, v bsoncore.Value) ([]lsc.Key, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch(cmdName, cmdName, v.Type, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s array: %v", cmdName, err)
	}
	if len(vals) > maxSessionsPerCommand {
		return nil, mongoerr.Newf(mongoerr.BadValue,
			"The number of sessions in %s must not exceed %d", cmdName, maxSessionsPerCommand)
	}
	keys := make([]lsc.Key, 0, len(vals))
	for _, x := range vals {
		k, err := service.ParseLsid(x)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// maxSessionsPerCommand bounds the session arrays one command may carry.
const maxSessionsPerCommand = 10000

// appendLsid appends {id: UUID} under key.
func appendLsid(b []byte, key string, id lsc.UUID) []byte {
	return bsoncore.AppendDocumentElement(b, key,
		bsoncore.NewDocumentBuilder().AppendBinary("id", 4, id[:]).Build())
}
