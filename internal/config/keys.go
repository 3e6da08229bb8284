package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

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
		lower := strings.ToLower(key)
		d := editDistance(lower, name)
		if len(lower) >= 3 && strings.HasPrefix(name, lower) {
			d = min(d, 2) // "master" for "master_name"
		}
		if d < bestDist {
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
