package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts the environment variables that override keys: the key's
// path in upper case with dots as underscores, e.g. AX_REDIS_ADDR for
// redis.addr. Every key outside pools, auth.tokens and worker.exec.allow can
// be set this way; lists take comma-separated values.
const EnvPrefix = "AX"

// Load reads one region's YAML file, applies the environment overrides and
// the defaults, and validates the result. Errors name the file as path was
// given and the key: "configs/x.yaml: pools[2].slots: must be > 0". On error
// the returned error is an Errors listing every problem found.
func Load(path string) (*Region, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Errors{{File: path, Message: err.Error()}}
	}
	return Parse(path, data)
}

// Parse is Load for a file already in memory; name is used in errors.
func Parse(name string, data []byte) (*Region, error) {
	p := &problems{file: name}

	// The file is read twice: by viper, which adds the environment but folds
	// every key to lower case and splits keys at dots, and as plain YAML,
	// which keeps the keys of maps whose keys are data (pool tags, exec rule
	// names and env) as written.
	raw := map[string]any{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		p.add("", "%s", err)
		return nil, p.err()
	}
	if raw == nil {
		raw = map[string]any{}
	}
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		p.add("", "%s", err)
		return nil, p.err()
	}
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	regionType := reflect.TypeFor[Region]()
	for _, key := range envKeys(regionType, "") {
		if err := v.BindEnv(key); err != nil {
			return nil, fmt.Errorf("config: bind %s: %w", key, err)
		}
	}
	settings := v.AllSettings()
	keepDataKeys(settings, raw, regionType)

	checkKeys(p, "", raw, regionType)
	r := Default()
	r.source = name
	if pools, ok := raw["pools"].([]any); ok {
		for range pools {
			r.Pools = append(r.Pools, defaultPool())
		}
	}
	decode(p, settings, r)
	inheritThresholds(raw, r)
	r.fillDerived(v.IsSet)
	hashTokens(p, r)
	if len(p.list) > 0 {
		// Validation would judge values that failed to decode by their
		// defaults; report what is known to be wrong first.
		return nil, p.err()
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

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
	switch to.Kind() {
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
	case reflect.Slice:
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
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		leaves = append(leaves, err)
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
				found = append(found, &FieldError{Key: joinKey(de.Name(), k), Message: "unknown key"})
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

// joinKey appends one key to a path. Keys of data maps are user-chosen and
// may hold dots, so they go in brackets, as mapstructure writes them.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func mapKey(path, key string) string { return path + "[" + key + "]" }

func elemKey(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// structFields maps each mapstructure key of a struct type to its field.
func structFields(t reflect.Type) map[string]reflect.StructField {
	fields := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		fields[name] = f
	}
	return fields
}

// isLeaf reports whether a field holds one value the environment can set:
// anything but a struct, a map, a pointer, or a list of structs.
func isLeaf(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return false
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Struct
	}
	return true
}

// envKeys lists the keys the environment may override.
func envKeys(t reflect.Type, path string) []string {
	var keys []string
	fields := structFields(t)
	names := sortedKeys(fields)
	for _, name := range names {
		f := fields[name]
		switch {
		case isLeaf(f.Type):
			keys = append(keys, joinKey(path, name))
		case f.Type.Kind() == reflect.Struct:
			keys = append(keys, envKeys(f.Type, joinKey(path, name))...)
		}
	}
	return keys
}

// keepDataKeys replaces, in viper's settings, every value the environment
// cannot set (lists of structs, maps) by the file's own, whose keys keep
// their case and dots.
func keepDataKeys(settings, raw map[string]any, t reflect.Type) {
	for name, f := range structFields(t) {
		rv, ok := raw[name]
		if !ok {
			continue
		}
		switch {
		case isLeaf(f.Type):
		case f.Type.Kind() == reflect.Struct:
			rm, ok := rv.(map[string]any)
			if !ok {
				continue
			}
			sm, ok := settings[name].(map[string]any)
			if !ok {
				sm = map[string]any{}
				settings[name] = sm
			}
			keepDataKeys(sm, rm, f.Type)
		default:
			settings[name] = rv
		}
	}
}

// checkKeys reports every key of the file that names no field, with a hint
// when it looks like a known key misspelt.
func checkKeys(p *problems, path string, raw any, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			return
		}
		fields := structFields(t)
		for _, k := range sortedKeys(m) {
			f, ok := fields[k]
			if !ok {
				p.add(joinKey(path, k), "unknown key%s", suggest(k, fields))
				continue
			}
			checkKeys(p, joinKey(path, k), m[k], f.Type)
		}
	case reflect.Slice:
		list, ok := raw.([]any)
		if !ok {
			return
		}
		for i, el := range list {
			checkKeys(p, elemKey(path, i), el, t.Elem())
		}
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return
		}
		for _, k := range sortedKeys(m) {
			checkKeys(p, mapKey(path, k), m[k], t.Elem())
		}
	}
}

// suggest names the known key closest to an unknown one, if any is close.
func suggest(key string, fields map[string]reflect.StructField) string {
	best, bestDist := "", 3
	for _, name := range sortedKeys(fields) {
		if d := editDistance(strings.ToLower(key), name); d < bestDist {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// inheritThresholds completes each pool's own thresholds with the region's:
// a pool that sets only spill keeps the region's alert, pause and resume.
func inheritThresholds(raw map[string]any, r *Region) {
	pools, _ := raw["pools"].([]any)
	for i, rp := range pools {
		m, _ := rp.(map[string]any)
		th, ok := m["thresholds"].(map[string]any)
		if !ok || i >= len(r.Pools) {
			continue
		}
		t := r.Thresholds
		// Problems in this map were reported by the first decode.
		d, err := mapstructure.NewDecoder(decoderConfig(&t))
		if err == nil && d.Decode(th) == nil {
			r.Pools[i].Thresholds = &t
		}
	}
}

// hashTokens replaces each plain token by its SHA-256, so that no plain
// token outlives loading, and lower-cases given hashes.
func hashTokens(p *problems, r *Region) {
	for i := range r.Auth.Tokens {
		t := &r.Auth.Tokens[i]
		key := elemKey("auth.tokens", i)
		switch {
		case t.Token != "" && t.TokenSHA256 != "":
			p.add(key, "set token_sha256 or token, not both")
		case t.Token != "":
			if len(t.Token) < minTokenLen {
				p.add(joinKey(key, "token"), "too short: use at least %d characters", minTokenLen)
			}
			sum := sha256.Sum256([]byte(t.Token))
			t.TokenSHA256 = hex.EncodeToString(sum[:])
		default:
			t.TokenSHA256 = strings.ToLower(t.TokenSHA256)
		}
		t.Token = ""
	}
}

// minTokenLen keeps guessable tokens out: 16 random characters are far
// beyond brute force over the network.
const minTokenLen = 16
