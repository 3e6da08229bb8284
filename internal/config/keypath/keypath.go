package keypath

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Join appends one key to a path. Keys of data maps are user-chosen and
// may hold dots, so they go in brackets, as mapstructure writes them.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Entry is the path of a map entry: its key in brackets.
func Entry(path, key string) string { return path + "[" + key + "]" }

// Elem is the path of a list element: its index in brackets.
func Elem(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Fields maps each mapstructure key of a struct type to its field.
func Fields(t reflect.Type) map[string]reflect.StructField {
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

// IsLeaf reports whether a field holds one value the environment can set:
// anything but a struct, a map, a pointer, or a list of structs.
func IsLeaf(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return false
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Struct
	}
	return true
}

// Leaves lists the keys the environment may override.
func Leaves(t reflect.Type, path string) []string {
	var keys []string
	fields := Fields(t)
	names := Sorted(fields)
	for _, name := range names {
		f := fields[name]
		switch {
		case IsLeaf(f.Type):
			keys = append(keys, Join(path, name))
		case f.Type.Kind() == reflect.Struct:
			keys = append(keys, Leaves(f.Type, Join(path, name))...)
		}
	}
	return keys
}

// KeepData replaces, in viper's settings, every value the environment
// cannot set (lists of structs, maps) by the file's own, whose keys keep
// their case and dots.
func KeepData(settings, raw map[string]any, t reflect.Type) {
	for name, f := range Fields(t) {
		rv, ok := raw[name]
		if !ok {
			continue
		}
		switch {
		case IsLeaf(f.Type):
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
			KeepData(sm, rm, f.Type)
		default:
			settings[name] = rv
		}
	}
}

// Suggest names the known key closest to an unknown one, if any is close.
func Suggest(key string, fields map[string]reflect.StructField) string {
	best, bestDist := "", 3
	for _, name := range Sorted(fields) {
		lower := strings.ToLower(key)
		d := Distance(lower, name)
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

// Distance is the edit distance (Levenshtein) between a and b.
func Distance(a, b string) int {
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

// Sorted is m's keys in order.
func Sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
