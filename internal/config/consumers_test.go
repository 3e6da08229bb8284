package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestEverySettingHasAConsumer: each key of a region file is read by some
// code outside this package (a setting validated and documented but used
// nowhere is a defect: provider and data_dir were). The check is by field
// name: some selector outside internal/config names the field, or, for a
// field this package reads for its callers, the method that does.
func TestEverySettingHasAConsumer(t *testing.T) {
	// Fields read through a method of this package, and the method.
	viaMethod := map[string]string{
		"ExpiresAt": "Expires", // Token.Expires
		"Scope":     "Share",   // Limit.Share
		"Weights":   "Share",
		// Load reads the file into Password (readSecretFiles).
		"PasswordFile": "Load",
		// Quotas.Schedules reads both into schedule.Limits.
		"MaxSchedules":           "Schedules",
		"ScheduleFiresPerSecond": "Schedules",
		"MaxBackfillPeriods":     "Schedules",
	}
	used := map[string]bool{}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			if filepath.ToSlash(path) == filepath.ToSlash(filepath.Join(root, "internal", "config")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok {
				used[s.Sel.Name] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !used["Pools"] || !used["Redis"] {
		t.Fatalf("read %d selectors outside internal/config: the walk missed the repository", len(used))
	}
	seen := map[reflect.Type]bool{}
	var walk func(tp reflect.Type, key string)
	walk = func(tp reflect.Type, key string) {
		for tp.Kind() == reflect.Pointer || tp.Kind() == reflect.Slice || tp.Kind() == reflect.Map {
			tp = tp.Elem()
		}
		if tp.Kind() != reflect.Struct || seen[tp] || !strings.HasPrefix(tp.PkgPath(), reflect.TypeOf(Region{}).PkgPath()) {
			return
		}
		seen[tp] = true
		for i := range tp.NumField() {
			f := tp.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			k := strings.TrimPrefix(key+"."+tag, ".")
			if m := viaMethod[f.Name]; m != "" {
				if !used[m] {
					t.Errorf("%s (%s.%s, read by its method %s): nothing outside internal/config calls %s", k, tp.Name(), f.Name, m, m)
				}
			} else if !used[f.Name] {
				t.Errorf("%s (%s.%s): no code outside internal/config reads it; use it, or say in configs/example.yaml that it does nothing", k, tp.Name(), f.Name)
			}
			walk(f.Type, k)
		}
	}
	walk(reflect.TypeOf(Region{}), "")
	if len(seen) < 10 {
		t.Fatalf("walked %d config structs, want the region file's", len(seen))
	}
}
