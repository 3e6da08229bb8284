package task

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestTaskJSONKeepsResultBytes: a result that is not UTF-8 text goes as
// result_base64 and comes back byte for byte; a text result stays result.
func TestTaskJSONKeepsResultBytes(t *testing.T) {
	for _, res := range []string{"\xff\x00\xfe", `{"rows":3}`, "plain text", ""} {
		b, err := json.Marshal(&Task{ID: "x", Result: res})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "result_base64") == (res == "" || res[0] != 0xff) {
			t.Fatalf("%q encoded as %s", res, b)
		}
		var back Task
		if err := json.Unmarshal(b, &back); err != nil || back.Result != res || back.ID != "x" {
			t.Fatalf("%q came back as %+v %v", res, back, err)
		}
	}
}

// TestParentsBoundedAndRefusedFromClients: parents over MaxParentResults
// fail validation naming parents; a client's spec naming any is refused.
func TestParentsBoundedAndRefusedFromClients(t *testing.T) {
	ok := &Spec{Type: "t", Parents: ParentResults{"a": []byte("x")}}
	if err := ok.Normalize(DefaultDefaults(), time.Now()); err != nil {
		t.Fatal(err)
	}
	big := &Spec{Type: "t", Parents: ParentResults{"a": make([]byte, MaxParentResults)}}
	var fe *FieldError
	if err := big.Normalize(DefaultDefaults(), time.Now()); !asField(err, &fe) || fe.Field != "parents" {
		t.Fatalf("over the cap: %v", err)
	}
	sp, err := DecodeSpec([]byte(`{"type":"t","parents":{"a":"eA=="}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.RefuseInternal(); !asField(err, &fe) || fe.Field != "parents" {
		t.Fatalf("a client's parents: %v", err)
	}
	if err := (&Spec{Type: "t"}).RefuseInternal(); err != nil {
		t.Fatal(err)
	}
}

func asField(err error, fe **FieldError) bool {
	f, ok := err.(*FieldError)
	*fe = f
	return ok
}
