package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set by the linker (-X); never assigned at run time.
var (
	version string
	commit  string
	date    string
)

// Unknown stands for a field neither the linker nor the toolchain recorded.
const Unknown = "unknown"

// Info describes one build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"build_date"`
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns this binary's build information.
//
// The stamp is three link-time strings, set with
//
//	go build -ldflags "-X github.com/ax-sched/ax/internal/buildinfo.version=v1.2.0
//	  -X github.com/ax-sched/ax/internal/buildinfo.commit=$(git rev-parse HEAD)
//	  -X github.com/ax-sched/ax/internal/buildinfo.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// as `make build` and deploy/docker/Dockerfile do. A plain `go build` or
// `go install` leaves them empty; Get then falls back to what the Go
// toolchain recorded in the binary (the module version, vcs.revision and
// vcs.time), and to "unknown".
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, commit, date, bi)
}

// String is the one-line form `ax version` prints.
func (i Info) String() string {
	return "ax " + i.Version + " (commit " + i.Commit + ", built " + i.BuildDate + ", " + i.GoVersion + ", " + i.Platform + ")"
}

// resolve prefers the linker's strings and fills what they leave empty
// from bi (nil when the binary carries no build information).
func resolve(version, commit, date string, bi *debug.BuildInfo) Info {
	i := Info{Version: version, Commit: commit, BuildDate: date, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		// "(devel)" is what a build inside the module's own tree records.
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if i.Commit == "" {
					i.Commit = s.Value
				}
			case "vcs.time":
				if i.BuildDate == "" {
					i.BuildDate = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		// Only a commit taken from the toolchain is known to match its
		// vcs.modified flag; a linker-stamped one says what the builder chose.
		if commit == "" && i.Commit != "" && modified {
			i.Commit += "-dirty"
		}
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Commit == "" {
		i.Commit = Unknown
	}
	if i.BuildDate == "" {
		i.BuildDate = Unknown
	}
	return i
}
