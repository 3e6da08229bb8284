package endpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/ax-sched/ax/task"
)

// The one strict JSON decoder of the API: every request body, and every raw
// object inside one (a batch's items, a DAG's nodes), is read through it.
// It knows the faults by encoding/json's typed errors and by walking the
// object's keys itself, never by the text of an error.

// TooLargeError is a request body over its limit (413).
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("request body larger than %d bytes", e.Limit)
}

// ReadBody reads r's body, at most limit bytes (*TooLargeError above).
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &TooLargeError{Limit: mbe.Limit}
	}
	return b, err
}

// Decode reads r's body, at most limit bytes, strictly into v (a pointer
// to a struct): see DecodeStrict. Errors are *TooLargeError or
// *task.FieldError.
func Decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	b, err := ReadBody(w, r, limit)
	if err != nil {
		return err
	}
	if derr := DecodeStrict(b, v); derr != nil {
		return derr.FieldError("a JSON object is required")
	}
	return nil
}

// Fault is what is wrong with a JSON value (decodeError).
type Fault int

const (
	FaultEmpty     Fault = iota + 1 // no value at all
	FaultSyntax                     // not JSON
	FaultTrailing                   // data after the value
	FaultNotObject                  // a value where an object is wanted
	FaultUnknown                    // a key that names no field
	FaultType                       // a field's value of the wrong type
	FaultValue                      // a field's value its type refuses (detail)
)

// DecodeError says why DecodeStrict refused a value: Field names the key
// (FaultUnknown, FaultType), Want the type a field (or the value) must
// have, Detail what encoding/json said (FaultSyntax, FaultValue).
type DecodeError struct {
	Fault       Fault
	Field, Want string
	Detail      string
}

func (e *DecodeError) Error() string { return e.FieldError("a JSON object is required").Error() }

// FieldError is the error as the API answers it (400, naming the field);
// empty says what an empty body lacks.
func (e *DecodeError) FieldError(empty string) *task.FieldError {
	switch e.Fault {
	case FaultEmpty:
		return &task.FieldError{Msg: "empty body; " + empty}
	case FaultTrailing:
		return &task.FieldError{Msg: "unexpected data after the JSON object"}
	case FaultNotObject, FaultType:
		return &task.FieldError{Field: e.Field, Msg: "must be " + e.Want}
	case FaultUnknown:
		return &task.FieldError{Field: e.Field, Msg: "unknown field"}
	}
	return &task.FieldError{Field: e.Field, Msg: "invalid JSON: " + e.Detail}
}

// DecodeStrict decodes data, one JSON value, into v, a pointer to a struct
// whose fields are plain values or raw (json.RawMessage): no value, data
// after the value, a key that names none of v's fields (matched as
// encoding/json matches them, exact or else ignoring case; the first in
// the document is named) and a value of the wrong type are each a
// *decodeError. Nested objects are raw here and decoded in turn by their
// own caller, as strictly.
func DecodeStrict(data []byte, v any) *DecodeError {
	// A well-formed value whose every key names a field (nested ones
	// included: stricter than the rules above, so its success implies
	// theirs) takes one strict decode. Anything else is decoded again from
	// a zero v by the rules above, which name the fault: the first pass
	// costs a refused request little, and spares a well-formed one two more
	// walks over its JSON.
	fast := json.NewDecoder(bytes.NewReader(data))
	fast.DisallowUnknownFields()
	if fast.Decode(v) == nil && len(bytes.TrimSpace(data[fast.InputOffset():])) == 0 {
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().SetZero()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return &DecodeError{Fault: FaultEmpty}
		}
		return &DecodeError{Fault: FaultSyntax, Detail: syntaxDetail(err)}
	}
	if rest := data[dec.InputOffset():]; len(bytes.TrimSpace(rest)) > 0 {
		return &DecodeError{Fault: FaultTrailing}
	}
	if t := reflect.TypeOf(v); t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && isObject(raw) {
		if key, ok := task.UnknownKey(raw, t.Elem()); ok {
			return &DecodeError{Fault: FaultUnknown, Field: key}
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			f := FaultType
			if te.Field == "" {
				f = FaultNotObject
			}
			return &DecodeError{Fault: f, Field: te.Field, Want: te.Type.String()}
		}
		return &DecodeError{Fault: FaultValue, Detail: syntaxDetail(err)}
	}
	return nil
}

// syntaxDetail is what encoding/json says of a fault (where a
// *json.SyntaxError is, what an Unmarshaler refused), shown to the caller
// without the package's "json: " prefix.
func syntaxDetail(err error) string { return strings.TrimPrefix(err.Error(), "json: ") }

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}
