package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/ax-sched/ax/internal/config/keypath"
)

// decoderConfig decodes strictly: exact key names, unknown keys are errors,
// durations only as strings; strings (the environment) may fill numbers,
// booleans and comma-separated lists.
func decoderConfig(out any) *mapstructure.DecoderConfig {
	return &mapstructure.DecoderConfig{
		Result:      out,
		TagName:     "mapstructure",
		ErrorUnused: true,
		MatchName:   func(key, field string) bool { return key == field },
		DecodeHook:  scalarHook,
	}
}

func decode(p *problems, input map[string]any, out any) {
	d, err := mapstructure.NewDecoder(decoderConfig(out))
	if err != nil {
		p.add("", "internal error: %s", err)
		return
	}
	if err := d.Decode(input); err != nil {
		addDecodeErrors(p, err)
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// scalarHook converts one value before mapstructure stores it.
func scalarHook(from, to reflect.Type, data any) (any, error) {
	if to == durationType {
		s, ok := data.(string)
		if !ok {
			return nil, fmt.Errorf("must be a duration string such as \"10s\", got %s", describe(data))
		}
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q (use Go syntax: \"300ms\", \"10s\", \"1h30m\")", s)
		}
		return d, nil
	}
	s, isString := data.(string)
	kind := to.Kind()
	if kind == reflect.Pointer {
		kind = to.Elem().Kind()
	}
	switch kind {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if isString {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("must be a whole number, got %q", s)
			}
			return n, nil
		}
		if f, ok := data.(float64); ok && f != math.Trunc(f) {
			return nil, fmt.Errorf("must be a whole number, got %v", f)
		}
	case reflect.Float32, reflect.Float64:
		if isString {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return nil, fmt.Errorf("must be a number, got %q", s)
			}
			return f, nil
		}
	case reflect.Bool:
		if isString {
			b, err := strconv.ParseBool(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("must be true or false, got %q", s)
			}
			return b, nil
		}
	case reflect.String:
		// YAML reads `version: 2` as a number; a string key takes it as text.
		switch data.(type) {
		case int, int64, uint64, float64, bool:
			return fmt.Sprint(data), nil
		}
	case reflect.Struct, reflect.Map:
		if _, ok := data.(map[string]any); !ok && data != nil {
			return nil, fmt.Errorf("must be a mapping, got %s", describe(data))
		}
	case reflect.Slice:
		if _, ok := data.([]any); !ok && !isString && data != nil {
			return nil, fmt.Errorf("must be a list, got %s", describe(data))
		}
		// A list from the environment: AX_ETCD_REGIONAL_ENDPOINTS=a,b
		if isString && to.Elem().Kind() == reflect.String {
			var list []string
			for _, part := range strings.Split(s, ",") {
				if part = strings.TrimSpace(part); part != "" {
					list = append(list, part)
				}
			}
			return list, nil
		}
	}
	return data, nil
}

// addDecodeErrors turns mapstructure's errors into FieldErrors.
func addDecodeErrors(p *problems, err error) {
	var leaves []error
	var walk func(error)
	walk = func(err error) {
		switch x := err.(type) {
		case *mapstructure.DecodeError:
			leaves = append(leaves, x)
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			// Decode wraps the joined errors in a summary line.
			walk(x.Unwrap())
		default:
			leaves = append(leaves, err)
		}
	}
	walk(err)
	var found []*FieldError
	for _, leaf := range leaves {
		var de *mapstructure.DecodeError
		if !errors.As(leaf, &de) {
			found = append(found, &FieldError{Message: leaf.Error()})
			continue
		}
		inner := de.Unwrap()
		var ute *mapstructure.UnconvertibleTypeError
		var pe *mapstructure.ParseError
		switch {
		case strings.HasPrefix(inner.Error(), "has invalid keys: "):
			for _, k := range strings.Split(strings.TrimPrefix(inner.Error(), "has invalid keys: "), ", ") {
				found = append(found, &FieldError{Key: keypath.Join(de.Name(), k), Message: "unknown key"})
			}
		case errors.As(inner, &ute):
			found = append(found, &FieldError{Key: de.Name(), Message: fmt.Sprintf("must be %s, got %s", kindName(ute.Expected.Type()), describe(ute.Value))})
		case errors.As(inner, &pe):
			found = append(found, &FieldError{Key: de.Name(), Message: fmt.Sprintf("must be %s, got %s", kindName(pe.Expected.Type()), describe(pe.Value))})
		default:
			found = append(found, &FieldError{Key: de.Name(), Message: inner.Error()})
		}
	}
	// mapstructure visits maps in random order.
	sort.SliceStable(found, func(i, j int) bool { return found[i].Key < found[j].Key })
	for _, f := range found {
		p.add(f.Key, "%s", f.Message)
	}
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "a mapping"
	}
	return t.String()
}

// describe says what a YAML value is, for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("string %q", x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case int, int64, uint64:
		return fmt.Sprintf("number %v", x)
	case float64:
		return fmt.Sprintf("number %v", x)
	}
	return fmt.Sprintf("%T %v", v, v)
}
