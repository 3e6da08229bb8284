// Command shapecheck fails when the module's code outgrows the limits the project keeps:
// a package's non-test Go over 2 500 lines, a type with more than 40 methods, a function
// longer than 150 lines or above cyclomatic complexity 35, or a comment that cites one
// of the project's issues (history belongs in commit messages, not in the code), in Go
// or in a script beside it (Lua, shell, Python, TypeScript, JavaScript).
//
// Usage: go run ./internal/tools/shapecheck [-pending FILE] [root]
//
// It reads the files as source, runs nothing, and prints one line per finding; the exit
// status is 1 when there is any. FILE lists, one regular expression a line (# starts a
// comment), the findings the project has accepted as work still to do: a finding one of
// them matches is printed as pending and does not fail, and an expression that matches
// no finding fails, so the list only shrinks.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The limits. A change that needs more splits the code instead of raising these.
const (
	maxPackageLines = 2500
	maxMethods      = 40
	maxFuncLines    = 150
	maxComplexity   = 35
)

// issueRef matches a comment that cites one of the project's issues: a hash and a
// number, or the word issue followed by a number. An upstream reference written as
// owner/repo#N names a cause outside the project and is allowed.
var issueRef = regexp.MustCompile(`(?i)(^|[\s(\[,;])#\d+\b|\bissues?\s+#?\d+`)

type finding struct{ pos, msg string }

func main() {
	pendingFile := flag.String("pending", "", "file of regular expressions matching accepted findings")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	pending, err := readPending(*pendingFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shapecheck:", err)
		os.Exit(2)
	}
	dirs := map[string][]string{}
	var scriptFiles []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "vendor" || name == "dist" || name == "__pycache__") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		} else if isScript(path) {
			scriptFiles = append(scriptFiles, path)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shapecheck:", err)
		os.Exit(2)
	}
	var out []finding
	keys := make([]string, 0, len(dirs))
	for k := range dirs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, dir := range keys {
		f, err := checkDir(dir, dirs[dir])
		if err != nil {
			fmt.Fprintln(os.Stderr, "shapecheck:", err)
			os.Exit(2)
		}
		out = append(out, f...)
	}
	for _, path := range scriptFiles {
		src, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "shapecheck:", err)
			os.Exit(2)
		}
		out = append(out, scriptFindings(path, string(src))...)
	}
	failed := 0
	used := make([]bool, len(pending))
	for _, f := range out {
		line := f.pos + ": " + f.msg
		accepted := false
		for i, re := range pending {
			if re.MatchString(line) {
				accepted, used[i] = true, true
			}
		}
		if accepted {
			fmt.Println("pending:", line)
			continue
		}
		fmt.Println(line)
		failed++
	}
	for i, re := range pending {
		if !used[i] {
			fmt.Printf("%s: pending entry %q matches no finding any more: delete it\n", *pendingFile, re)
			failed++
		}
	}
	if failed > 0 {
		fmt.Printf("shapecheck: %d finding(s)\n", failed)
		os.Exit(1)
	}
}

// readPending reads the accepted findings' expressions; an empty name is none.
func readPending(name string) ([]*regexp.Regexp, error) {
	if name == "" {
		return nil, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*regexp.Regexp
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		re, err := regexp.Compile(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, re)
	}
	return out, sc.Err()
}

func checkDir(dir string, files []string) ([]finding, error) {
	var out []finding
	fset := token.NewFileSet()
	lines := 0
	methods := map[string]int{}
	methodPos := map[string]string{}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if issueRef.MatchString(c.Text) {
					out = append(out, finding{fset.Position(c.Pos()).String(), "comment cites an issue number: " + strings.TrimSpace(firstLine(c.Text))})
				}
			}
		}
		if strings.HasSuffix(path, "_test.go") || ast.IsGenerated(f) {
			continue
		}
		lines += strings.Count(string(src), "\n")
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				recv := recvName(fd.Recv.List[0].Type)
				name = recv + "." + name
				methods[recv]++
				if _, ok := methodPos[recv]; !ok {
					methodPos[recv] = fset.Position(fd.Pos()).String()
				}
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > maxFuncLines {
				out = append(out, finding{start.String(), fmt.Sprintf("func %s is %d lines (limit %d)", name, n, maxFuncLines)})
			}
			if c := complexity(fd); c > maxComplexity {
				out = append(out, finding{start.String(), fmt.Sprintf("func %s has cyclomatic complexity %d (limit %d)", name, c, maxComplexity)})
			}
		}
	}
	if lines > maxPackageLines {
		out = append(out, finding{dir, fmt.Sprintf("package has %d lines of non-test Go (limit %d)", lines, maxPackageLines)})
	}
	for recv, n := range methods {
		if n > maxMethods {
			out = append(out, finding{methodPos[recv], fmt.Sprintf("type %s has %d methods (limit %d)", recv, n, maxMethods)})
		}
	}
	return out, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// complexity is the cyclomatic complexity as gocyclo counts it: one, plus one for each
// if, for, range, non-default case and comm clause, && and ||. Function literals count
// toward the function that holds them.
func complexity(fd *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fd, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}
