package defs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ax-sched/ax/schedule/runid"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A definition stored without an id sequence (created by an earlier
// version) keeps the ids derived from its tenant and name; one stored
// with its sequence keeps that one through a rewrite (pause).
func TestStoredIDSeq(t *testing.T) {
	st := Store{prefix: "/ax/"}
	def := `{"name": "nightly", "cron": "@daily", "task": {"type": "x", "tenant": "acme"}}`
	kv := &mvccpb.KeyValue{Key: []byte("/ax/schedules/acme/nightly"), Value: []byte(def)}
	sd, ok := st.parse(kv)
	if !ok || sd.IDSeq() != runid.DerivedSeq("acme", "nightly") {
		t.Fatalf("parse %v: seq %d, want the derived %d", ok, sd.IDSeq(), runid.DerivedSeq("acme", "nightly"))
	}
	seq := uint32(12345)
	b, err := json.Marshal(record{Schedule: sd.Def, IDSeq: &seq})
	if err != nil {
		t.Fatal(err)
	}
	kv.Value = b
	if sd, ok = st.parse(kv); !ok || sd.IDSeq() != 12345 || sd.Def.Name != "nightly" || sd.Def.Task.Tenant != "acme" {
		t.Fatalf("parse %s: %v %d %+v", b, ok, sd.IDSeq(), sd.Def)
	}
	if b, _ = json.Marshal(record{Schedule: sd.Def, IDSeq: sd.Seq}); !strings.Contains(string(b), `"id_seq":12345`) {
		t.Fatalf("rewritten as %s", b)
	}
}
