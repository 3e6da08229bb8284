package config

import (
	"os"
	"strings"
)

// readSecretFiles sets each password that has a *_file key from its file:
// the file's content without its trailing newline. A key and its file both
// set, an unreadable file or an empty one is a problem named by the file
// key.
func (r *Region) readSecretFiles(p *problems) {
	for _, s := range []struct {
		key  string
		file string
		dst  *string
	}{
		{"redis.password", r.Redis.PasswordFile, &r.Redis.Password},
		{"redis.sentinel.password", r.Redis.Sentinel.PasswordFile, &r.Redis.Sentinel.Password},
	} {
		if s.file == "" {
			continue
		}
		key := s.key + "_file"
		if *s.dst != "" {
			p.add(key, "set together with %s: give one of them", s.key)
			continue
		}
		b, err := os.ReadFile(s.file)
		if err != nil {
			p.add(key, "%v", err)
			continue
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			p.add(key, "%s is empty", s.file)
			continue
		}
		*s.dst = v
	}
}
