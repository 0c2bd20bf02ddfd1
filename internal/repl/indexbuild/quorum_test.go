package indexbuild

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

func TestParseCommitQuorum(t *testing.T) {
	for _, tc := range []struct {
		v    bsoncore.Value
		want CommitQuorum
		code mongoerr.Code
	}{
		{bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "majority")}, CommitQuorum{mode: "majority"}, 0},
		{bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "tag")}, CommitQuorum{}, mongoerr.UnsatisfiableCommitQuorum},
		{bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 2)}, CommitQuorum{n: 2}, 0},
		{bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, 1.5)}, CommitQuorum{}, mongoerr.FailedToParse},
		{bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 51)}, CommitQuorum{}, mongoerr.FailedToParse},
		{bsoncore.Value{Type: bsoncore.TypeBoolean, Data: []byte{1}}, CommitQuorum{}, mongoerr.FailedToParse},
	} {
		q, err := ParseCommitQuorum(tc.v)
		if got := mongoerr.CodeOf(err); got != tc.code || (err == nil && q != tc.want) {
			t.Errorf("%v: %v, %v; want %v, code %d", tc.v, q, err, tc.want, tc.code)
		}
	}
}

func TestQuorumSatisfied(t *testing.T) {
	m := quorumMembers{voters: []string{"a", "b", "c"}, dataBearing: 3}
	votes := map[string]bool{"a": true, "b": true}
	if !(CommitQuorum{mode: "majority"}).satisfied(m, votes) {
		t.Error("2 of 3 votes do not satisfy majority")
	}
	if (CommitQuorum{mode: "votingMembers"}).satisfied(m, votes) {
		t.Error("2 of 3 votes satisfy votingMembers")
	}
	if err := (CommitQuorum{n: 4}).check(m); !mongoerr.Is(err, mongoerr.UnsatisfiableCommitQuorum) {
		t.Errorf("4 of 3 data-bearing members: %v, want UnsatisfiableCommitQuorum", err)
	}
}
