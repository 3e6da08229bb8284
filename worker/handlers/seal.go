package handlers

import (
	"os"
	"strings"
)

// secretEnv reports whether an environment variable holds one of ax's
// secrets: an AX_ name that speaks of a password, token or secret
// (AX_REDIS_PASSWORD, AX_AUTH_CLUSTER_TOKEN). AX_..._FILE names hold a
// path, not the secret.
func secretEnv(name string) bool {
	up := strings.ToUpper(name)
	if !strings.HasPrefix(up, "AX_") || strings.HasSuffix(up, "_FILE") {
		return false
	}
	return strings.Contains(up, "PASSWORD") || strings.Contains(up, "TOKEN") || strings.Contains(up, "SECRET")
}

// secretNames lists the secret variables of the process's environment.
func secretNames() []string {
	var names []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); secretEnv(name) {
			names = append(names, name)
		}
	}
	return names
}

// forgetter unsets names from the process's environment.
func forgetter(names []string) func() {
	return func() {
		for _, n := range names {
			_ = os.Unsetenv(n)
		}
	}
}
