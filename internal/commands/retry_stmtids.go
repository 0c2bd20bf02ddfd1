package commands

// Statement ids of a write command (MongoDB's write_ops::getStmtIdForWriteAt): statement i of
// a retryable write is recorded under stmtIds[i] when the command names them (a router
// splitting a client's batch over shards sends each shard its statements' original ids), else
// under stmtId+i (stmtId, a generic argument, defaults to 0).

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// parseStmtIDs reads stmtId and stmtIds and checks stmtIds against the number of statements
// (the documents, updates or deletes array), as MongoDB's validateWriteCommand.
func parseStmtIDs(cmd bsoncore.Document) (base int32, ids []int32, err error) {
	sv, isv := lookup(cmd, "stmtId"), lookup(cmd, "stmtIds")
	if sv.Type != 0 {
		n, ok := sv.AsInt64OK()
		if !ok || n != int64(int32(n)) {
			return 0, nil, typeMismatch(stmtCommandName(cmd), "stmtId", sv.Type, "int")
		}
		base = int32(n)
	}
	if isv.Type == 0 {
		return base, nil, nil
	}
	arr, ok := isv.ArrayOK()
	if !ok {
		return 0, nil, typeMismatch(stmtCommandName(cmd), "stmtIds", isv.Type, "array")
	}
	if sv.Type != 0 {
		return 0, nil, mongoerr.New(mongoerr.InvalidOptions, "May not specify both stmtId and stmtIds in write command")
	}
	vals, _ := arr.Values()
	for i, v := range vals {
		n, ok := v.AsInt64OK()
		if !ok || n != int64(int32(n)) {
			return 0, nil, typeMismatch(stmtCommandName(cmd), "stmtIds."+itoa(int64(i)), v.Type, "int")
		}
		ids = append(ids, int32(n))
	}
	ops := 0
	for _, k := range []string{"documents", "updates", "deletes"} {
		if a, ok := lookup(cmd, k).ArrayOK(); ok {
			v, _ := a.Values()
			ops = len(v)
			break
		}
	}
	if len(ids) != ops {
		return 0, nil, mongoerr.Newf(mongoerr.InvalidLength,
			"Number of statement ids must match the number of batch entries. Got %d statement ids but %d operations. Statement ids: %s",
			len(ids), ops, bsonutil.FormatDoc(bsoncore.NewDocumentBuilder().AppendArray("stmtIds", arr).Build()))
	}
	return base, ids, nil
}

func stmtCommandName(cmd bsoncore.Document) string {
	if e, err := cmd.IndexErr(0); err == nil {
		return e.Key()
	}
	return ""
}
