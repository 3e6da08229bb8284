package deploy

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/buildinfo"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	from string // the FROM line's arguments
	ins  []instruction
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// parseDockerfile splits a Dockerfile into stages. It knows what this
// repository's Dockerfile uses: comments, continuation lines, one
// instruction per logical line.
func parseDockerfile(t *testing.T, data string) []stage {
	t.Helper()
	var stages []stage
	var logical string
	for _, line := range strings.Split(data, "\n") {
		trimmed := strings.TrimSpace(line)
		if logical == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			logical += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		logical += trimmed
		cmd, args, _ := strings.Cut(logical, " ")
		logical = ""
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, stage{from: in.args})
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %s before the first FROM", in.cmd)
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	if logical != "" {
		t.Fatal("Dockerfile ends inside a continuation line")
	}
	return stages
}

// shellWords splits a RUN line as /bin/sh would for the simple commands the
// Dockerfile uses: whitespace-separated words, double or single quotes, and
// ${NAME} or $NAME expanded from vars (inside double quotes and bare). Any
// other shell syntax fails the test rather than being misread.
func shellWords(t *testing.T, s string, vars map[string]string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	quote := byte(0)
	expand := func(i int) int { // s[i] == '$'; returns the index after the name
		j, name := i+1, ""
		if j < len(s) && s[j] == '{' {
			end := strings.IndexByte(s[j:], '}')
			if end < 0 {
				t.Fatalf("RUN: unterminated ${ in %q", s)
			}
			name, j = s[j+1:j+end], j+end+1
		} else {
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			name = s[i+1 : j]
		}
		v, ok := vars[name]
		if !ok {
			t.Fatalf("RUN uses $%s, which no ARG or ENV of its stage defines", name)
		}
		cur.WriteString(v)
		return j
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
			i++
		case c == '$' && quote != '\'':
			inWord = true
			i = expand(i)
		case quote == '"':
			if c == '"' {
				quote = 0
			} else if c == '\\' || c == '`' {
				t.Fatalf("RUN: %q inside double quotes is not supported by this check", c)
			} else {
				cur.WriteByte(c)
			}
			i++
		case c == '"' || c == '\'':
			quote, inWord = c, true
			i++
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case strings.IndexByte("|&;<>()`\\*?[#~", c) >= 0:
			t.Fatalf("RUN: shell syntax %q is not supported by this check: %s", c, s)
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	if quote != 0 {
		t.Fatalf("RUN: unterminated quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// goBuild is the Dockerfile's `go build` command, split up.
type goBuild struct {
	env    []string // leading NAME=value words
	flags  []string // everything between "build" and the package, -o taken out
	output string   // the -o value
	pkg    string
}

func parseGoBuild(t *testing.T, words []string) goBuild {
	t.Helper()
	var b goBuild
	i := 0
	for ; i < len(words) && strings.Contains(words[i], "=") && !strings.HasPrefix(words[i], "-"); i++ {
		b.env = append(b.env, words[i])
	}
	if len(words) < i+3 || words[i] != "go" || words[i+1] != "build" {
		t.Fatalf("want [ENV=...] go build ..., got %q", words)
	}
	rest := words[i+2:]
	for j := 0; j < len(rest); j++ {
		switch w := rest[j]; {
		case w == "-o":
			if j+1 >= len(rest) {
				t.Fatal("go build: -o without a value")
			}
			b.output = rest[j+1]
			j++
		case strings.HasPrefix(w, "-o="):
			b.output = strings.TrimPrefix(w, "-o=")
		case strings.HasPrefix(w, "-") && j == len(rest)-1:
			t.Fatalf("go build: ends in a flag %q, no package", w)
		case strings.HasPrefix(w, "-"):
			b.flags = append(b.flags, w)
			// Flags of go build that take a separate value.
			if slices.Contains([]string{"-ldflags", "-gcflags", "-tags", "-mod", "-p", "-asmflags", "-buildmode", "-pgo"}, w) && j+1 < len(rest) {
				b.flags = append(b.flags, rest[j+1])
				j++
			}
		case j == len(rest)-1:
			b.pkg = w
		default:
			t.Fatalf("go build: unexpected word %q (one package, last)", w)
		}
	}
	if b.output == "" || b.pkg == "" {
		t.Fatalf("go build: want -o and a package, got %q", words)
	}
	return b
}

// ldflagStamps returns the -X name=value pairs of an -ldflags value.
func ldflagStamps(t *testing.T, flags []string) map[string]string {
	t.Helper()
	stamps := map[string]string{}
	for i, f := range flags {
		if f != "-ldflags" {
			continue
		}
		words := strings.Fields(flags[i+1])
		for j := 0; j < len(words); j++ {
			if words[j] == "-X" && j+1 < len(words) {
				k, v, _ := strings.Cut(words[j+1], "=")
				stamps[k] = v
				j++
			}
		}
	}
	return stamps
}

// dockerignore reads .dockerignore's patterns. It supports what this
// repository uses: plain paths and globs relative to the context root, and
// a leading "**/"; an exception ("!") fails the test.
func dockerignore(t *testing.T, root string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	var pats []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: exceptions (%q) are not supported by this check", line)
		}
		pats = append(pats, strings.TrimSuffix(strings.TrimPrefix(line, "/"), "/"))
	}
	return pats
}

// ignored reports whether rel (slash-separated, relative to the context)
// is left out by pats.
func ignored(t *testing.T, pats []string, rel string) bool {
	t.Helper()
	for _, p := range pats {
		candidates := []string{rel}
		if rest, ok := strings.CutPrefix(p, "**/"); ok {
			p = rest
			parts := strings.Split(rel, "/")
			for i := range parts {
				candidates = append(candidates, strings.Join(parts[i:], "/"))
			}
		}
		for _, c := range candidates {
			ok, err := filepath.Match(p, c)
			if err != nil {
				t.Fatalf(".dockerignore: %q: %v", p, err)
			}
			if ok {
				return true
			}
		}
	}
	return false
}

// copyContext copies root into dst minus what .dockerignore leaves out:
// the files `COPY . .` would see.
func copyContext(t *testing.T, root, dst string) {
	t.Helper()
	pats := dockerignore(t, root)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ignored(t, pats, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the build context: %v", err)
	}
}

// TestDockerfileBuildsAStaticBinary builds ax the way deploy/docker/Dockerfile
// does: its `go build` line, with its environment, flags and the build args
// substituted, in a copy of the context .dockerignore leaves. The binary
// must be static (it runs on distroless/static: no libc, no loader) and
// report the build args from `ax version`.
func TestDockerfileBuildsAStaticBinary(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "deploy", "docker", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, string(data))
	if len(stages) != 2 {
		t.Fatalf("want 2 stages (build, final), got %d", len(stages))
	}
	build, final := stages[0], stages[1]
	name := strings.Fields(build.from)
	if len(name) != 3 || !strings.HasPrefix(name[0], "golang:") || !strings.EqualFold(name[1], "AS") {
		t.Fatalf("build stage: FROM %s; want golang:<version> AS <name>", build.from)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(goMod), "\ngo "+strings.TrimPrefix(name[0], "golang:")) {
		t.Errorf("FROM %s does not match go.mod's go line", name[0])
	}

	// Build args get distinct values, so `ax version` shows which reached
	// which variable.
	want := buildinfo.Info{Version: "v9.8.7-test", Commit: "0123456789abcdef0123456789abcdef01234567", BuildDate: "2031-02-03T04:05:06Z"}
	args := map[string]string{"VERSION": want.Version, "COMMIT": want.Commit, "DATE": want.BuildDate}
	vars := map[string]string{}
	var gb *goBuild
	for _, in := range build.ins {
		switch in.cmd {
		case "ARG":
			k, _, _ := strings.Cut(in.args, "=")
			v, ok := args[k]
			if !ok {
				t.Fatalf("ARG %s: this test does not know what to pass", k)
			}
			vars[k] = v
		case "RUN":
			words := shellWords(t, in.args, vars)
			if slices.Equal(words, []string{"go", "mod", "download"}) {
				continue
			}
			b := parseGoBuild(t, words)
			gb = &b
		}
	}
	if gb == nil {
		t.Fatal("no go build in the build stage")
	}
	if !slices.Contains(gb.env, "CGO_ENABLED=0") || !slices.Contains(gb.flags, "-trimpath") || gb.pkg != "./cmd/ax" {
		t.Errorf("go build: env %q flags %q pkg %s; want CGO_ENABLED=0, -trimpath, ./cmd/ax", gb.env, gb.flags, gb.pkg)
	}

	// The final stage runs what the build stage wrote, as a non-root user.
	var copied, entry string
	for _, in := range final.all("COPY") {
		f := strings.Fields(in.args)
		if len(f) == 3 && f[0] == "--from="+name[2] && f[1] == gb.output {
			copied = f[2]
		}
	}
	if copied == "" {
		t.Errorf("final stage does not COPY --from=%s %s", name[2], gb.output)
	}
	if e := final.all("ENTRYPOINT"); len(e) != 1 {
		t.Errorf("final stage: want one ENTRYPOINT, got %d", len(e))
	} else {
		var argv []string
		if err := json.Unmarshal([]byte(e[0].args), &argv); err != nil || len(argv) == 0 {
			t.Errorf("ENTRYPOINT %s: want exec form [\"...\"] (%v)", e[0].args, err)
		} else {
			entry = argv[0]
		}
	}
	if entry != copied {
		t.Errorf("ENTRYPOINT runs %q, the binary is copied to %q", entry, copied)
	}
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") && final.from != "scratch" {
		t.Errorf("final stage FROM %s: want distroless static or scratch", final.from)
	}
	if u := final.all("USER"); len(u) == 0 || slices.Contains([]string{"root", "0", "root:root", "0:0"}, u[len(u)-1].args) {
		t.Errorf("final stage runs as root (USER %v)", u)
	}
	var exposed []string
	for _, in := range final.all("EXPOSE") {
		exposed = append(exposed, strings.Fields(in.args)...)
	}
	if !slices.Contains(exposed, "8080") || !slices.Contains(exposed, "9101") {
		t.Errorf("EXPOSE %q: want the API port 8080 and the worker metrics port 9101", exposed)
	}

	// make build stamps the same variables the same way.
	makeOut := string(run(t, root, nil, "make", "-s", "-n", "build", "VERSION="+want.Version, "COMMIT="+want.Commit, "DATE="+want.BuildDate))
	makeFlags := strings.Fields(makeOut)
	for i, f := range makeFlags { // make -n prints the shell line: -ldflags "…"
		if f == "-ldflags" {
			ld := strings.Trim(strings.Join(makeFlags[i+1:], " "), `"`)
			ld, _, _ = strings.Cut(ld, `"`)
			makeFlags = []string{"-ldflags", ld}
			break
		}
	}
	if got, want := ldflagStamps(t, makeFlags), ldflagStamps(t, gb.flags); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("make build stamps %v, the Dockerfile %v", got, want)
	}

	// What follows builds ax as the image does (its own flags, so a second
	// full build beside make's): `make test` runs it, `make check` stops
	// at the Dockerfile's checks above.
	if testing.Short() {
		t.Skip("builds ax as the image does: skipped under -short; `make test` runs it")
	}
	ctxDir := t.TempDir()
	copyContext(t, root, ctxDir)
	bin := filepath.Join(t.TempDir(), "ax")
	env := append(slices.Clone(gb.env), "GOFLAGS=") // the image's go has no GOFLAGS
	run(t, ctxDir, env, "go", append(append([]string{"build"}, gb.flags...), "-o", bin, gb.pkg)...)

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the binary is not ELF: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q (%v)", libs, err)
	}

	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("ax version: %v", err)
	}
	var got buildinfo.Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("ax version -o json: %v: %s", err, out)
	}
	goVersion := strings.TrimSpace(string(run(t, root, nil, "go", "env", "GOVERSION")))
	want.GoVersion, want.Platform = goVersion, got.Platform
	if got != want {
		t.Errorf("ax version -o json = %+v, want %+v", got, want)
	}
}
