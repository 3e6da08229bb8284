package task

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// UnknownKey is the first key, in document order, of the JSON object raw
// that names no field of the struct type t, matched as encoding/json
// matches keys (exactly, or else ignoring case). Strict decoders (DecodeSpec,
// the HTTP API's) use it instead of reading encoding/json's error text.
// Anything but a well-formed object reports nothing: the decode that
// follows says what is wrong.
func UnknownKey(raw []byte, t reflect.Type) (string, bool) {
	names := fieldNames(t, nil)
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := tok.(string)
		if !names.has(key) {
			return key, true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// jsonNames are the JSON names of a struct's fields.
type jsonNames []string

// has reports whether key names one of them as encoding/json matches keys:
// exactly, or else ignoring case.
func (ns jsonNames) has(key string) bool {
	for _, n := range ns {
		if n == key || strings.EqualFold(n, key) {
			return true
		}
	}
	return false
}

// fieldNames adds to ns the JSON names of t's exported fields, those of
// embedded structs included.
func fieldNames(t reflect.Type, ns jsonNames) jsonNames {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				ns = fieldNames(ft, ns)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ns = append(ns, name)
	}
	return ns
}

// HasJSONField reports whether key names a field of the struct type t, as
// encoding/json matches keys.
func HasJSONField(t reflect.Type, key string) bool { return fieldNames(t, nil).has(key) }
