package configs

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The shipped configs cite only files of this repository: a path that
// climbs out of it (../shared/…) means nothing to whoever cloned it.
func TestConfigsCiteNoPathOutsideTheRepository(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := filepath.Glob("dev/*.yaml")
	files = append(files, dev...)
	if len(files) < 4 {
		t.Fatalf("configs: %d YAML files, want example.yaml and the dev set", len(files))
	}
	outside := regexp.MustCompile(`(^|[\s(:"'])\.\./[A-Za-z0-9_.-]+`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range outside.FindAll(b, -1) {
			t.Errorf("%s cites %q, outside the repository", f, m)
		}
	}
}
