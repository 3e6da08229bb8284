package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := func(rev, at, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/ax-sched/ax", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}}
	}
	tests := []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  Info
	}{
		{
			name: "linker strings win over the toolchain's", version: "v1.2.0", commit: "abc123", date: "2026-01-02T03:04:05Z",
			bi:   vcs("fff", "2025-01-01T00:00:00Z", "true"),
			want: Info{Version: "v1.2.0", Commit: "abc123", BuildDate: "2026-01-02T03:04:05Z", GoVersion: "go1.99.1", Platform: platform},
		},
		{
			name: "toolchain vcs stamp fills what the linker left empty", version: "v1.2.0",
			bi:   vcs("fff", "2025-01-01T00:00:00Z", "false"),
			want: Info{Version: "v1.2.0", Commit: "fff", BuildDate: "2025-01-01T00:00:00Z", GoVersion: "go1.99.1", Platform: platform},
		},
		{
			name: "a modified tree marks the toolchain's commit dirty",
			bi:   vcs("fff", "2025-01-01T00:00:00Z", "true"),
			want: Info{Version: "dev", Commit: "fff-dirty", BuildDate: "2025-01-01T00:00:00Z", GoVersion: "go1.99.1", Platform: platform},
		},
		{
			name: "go install of a tagged module reports its version",
			bi:   &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v0.3.0"}},
			want: Info{Version: "v0.3.0", Commit: Unknown, BuildDate: Unknown, GoVersion: "go1.99.1", Platform: platform},
		},
		{
			name: "no build information at all",
			want: Info{Version: "dev", Commit: Unknown, BuildDate: Unknown, GoVersion: runtime.Version(), Platform: platform},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolve(tt.version, tt.commit, tt.date, tt.bi)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("resolve (-want +got):\n%s", d)
			}
		})
	}
}

func TestString(t *testing.T) {
	i := Info{Version: "v1.2.0", Commit: "abc", BuildDate: "2026-01-02T03:04:05Z", GoVersion: "go1.26.0", Platform: "linux/amd64"}
	want := "ax v1.2.0 (commit abc, built 2026-01-02T03:04:05Z, go1.26.0, linux/amd64)"
	if got := i.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
