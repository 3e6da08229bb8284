package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPasswordFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw, sentinel, empty := write("pw", "s3cret\n"), write("sentinel", "other\r\n"), write("empty", "\n")
	r := mustParse(t, minimal+"redis: {username: ax-worker, password_file: "+pw+", sentinel: {master_name: m, addrs: [\"127.0.0.1:26379\"], username: s, password_file: "+sentinel+"}}\n")
	if r.Redis.Password != "s3cret" || r.Redis.Sentinel.Password != "other" {
		t.Fatalf("passwords %q and %q, want the files' lines", r.Redis.Password, r.Redis.Sentinel.Password)
	}
	for yaml, want := range map[string]string{
		"redis: {username: u, password: x, password_file: " + pw + "}\n": "redis.password_file: set together with redis.password",
		"redis: {username: u, password_file: " + empty + "}\n":           "redis.password_file: " + empty + " is empty",
		"redis: {username: u, password_file: " + dir + "/nope}\n":        "redis.password_file: open " + dir + "/nope",
		"worker: {exec: {run_as: \"a b\"}}\n":                            `worker.exec.run_as: "a b": want user`,
	} {
		_, err := Parse("test.yaml", []byte(minimal+yaml))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", strings.TrimSpace(yaml), err, want)
		}
	}
	t.Setenv("AX_REDIS_PASSWORD_FILE", pw)
	if r := mustParse(t, minimal+"redis: {username: u}\n"); r.Redis.Password != "s3cret" {
		t.Fatalf("AX_REDIS_PASSWORD_FILE: password %q", r.Redis.Password)
	}
}
