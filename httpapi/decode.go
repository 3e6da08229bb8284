package httpapi

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

// readBody reads r's body, at most limit bytes (*TooLargeError above).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &TooLargeError{Limit: mbe.Limit}
	}
	return b, err
}

// decode reads r's body, at most limit bytes, strictly into v (a pointer
// to a struct): see decodeStrict. Errors are *TooLargeError or
// *task.FieldError.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	b, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	if derr := decodeStrict(b, v); derr != nil {
		return derr.fieldError("a JSON object is required")
	}
	return nil
}

// fault is what is wrong with a JSON value (decodeError).
type fault int

const (
	faultEmpty     fault = iota + 1 // no value at all
	faultSyntax                     // not JSON
	faultTrailing                   // data after the value
	faultNotObject                  // a value where an object is wanted
	faultUnknown                    // a key that names no field
	faultType                       // a field's value of the wrong type
	faultValue                      // a field's value its type refuses (detail)
)

// decodeError says why decodeStrict refused a value: field names the key
// (faultUnknown, faultType), want the type a field (or the value) must
// have, detail what encoding/json said (faultSyntax, faultValue).
type decodeError struct {
	fault       fault
	field, want string
	detail      string
}

func (e *decodeError) Error() string { return e.fieldError("a JSON object is required").Error() }

// fieldError is the error as the API answers it (400, naming the field);
// empty says what an empty body lacks.
func (e *decodeError) fieldError(empty string) *task.FieldError {
	switch e.fault {
	case faultEmpty:
		return &task.FieldError{Msg: "empty body; " + empty}
	case faultTrailing:
		return &task.FieldError{Msg: "unexpected data after the JSON object"}
	case faultNotObject, faultType:
		return &task.FieldError{Field: e.field, Msg: "must be " + e.want}
	case faultUnknown:
		return &task.FieldError{Field: e.field, Msg: "unknown field"}
	}
	return &task.FieldError{Field: e.field, Msg: "invalid JSON: " + e.detail}
}

// decodeStrict decodes data, one JSON value, into v, a pointer to a struct
// whose fields are plain values or raw (json.RawMessage): no value, data
// after the value, a key that names none of v's fields (matched as
// encoding/json matches them, exact or else ignoring case; the first in
// the document is named) and a value of the wrong type are each a
// *decodeError. Nested objects are raw here and decoded in turn by their
// own caller, as strictly.
func decodeStrict(data []byte, v any) *decodeError {
	// A well-formed value whose every key names a field (nested ones
	// included: stricter than the rules above, so its success implies
	// theirs) takes one strict decode. Anything else is decoded again from
	// a zero v by the rules above, which name the fault: the first pass
	// costs a refused request little, and spared a well-formed one two more
	// walks over its JSON (a single submit's spec decode was a third of
	// its server time).
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
			return &decodeError{fault: faultEmpty}
		}
		return &decodeError{fault: faultSyntax, detail: syntaxDetail(err)}
	}
	if rest := data[dec.InputOffset():]; len(bytes.TrimSpace(rest)) > 0 {
		return &decodeError{fault: faultTrailing}
	}
	if t := reflect.TypeOf(v); t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && isObject(raw) {
		if key, ok := task.UnknownKey(raw, t.Elem()); ok {
			return &decodeError{fault: faultUnknown, field: key}
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			f := faultType
			if te.Field == "" {
				f = faultNotObject
			}
			return &decodeError{fault: f, field: te.Field, want: te.Type.String()}
		}
		return &decodeError{fault: faultValue, detail: syntaxDetail(err)}
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
