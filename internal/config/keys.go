package config

import (
	"reflect"

	"github.com/ax-sched/ax/internal/config/keypath"
)

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
		fields := keypath.Fields(t)
		for _, k := range keypath.Sorted(m) {
			f, ok := fields[k]
			if !ok {
				p.add(keypath.Join(path, k), "unknown key%s", keypath.Suggest(k, fields))
				continue
			}
			checkKeys(p, keypath.Join(path, k), m[k], f.Type)
		}
	case reflect.Slice:
		list, ok := raw.([]any)
		if !ok {
			return
		}
		for i, el := range list {
			checkKeys(p, keypath.Elem(path, i), el, t.Elem())
		}
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return
		}
		for _, k := range keypath.Sorted(m) {
			checkKeys(p, keypath.Entry(path, k), m[k], t.Elem())
		}
	}
}
