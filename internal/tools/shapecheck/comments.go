package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// syntax is what a comment scanner needs of a language other than Go: how its
// comments open (and close, for block comments) and which quotes open strings,
// inside which no comment starts.
type syntax struct {
	line         []string    // line comment markers
	block        [][2]string // block comment open and close
	quotes       string      // characters that open and close a string
	longStrings  [][2]string // strings spanning lines (Lua [[ ]], Python """)
	markAfterGap bool        // a line marker starts a comment only at a word's start (sh: x#y is a word)
	regexps      bool        // a / where an operand begins opens a regular expression (JavaScript)
}

// scripts are the languages whose comments are checked beside Go's, by file
// extension.
var scripts = map[string]syntax{
	".lua": {line: []string{"--"}, block: [][2]string{{"--[[", "]]"}}, quotes: `'"`, longStrings: [][2]string{{"[[", "]]"}}},
	".sh":  {line: []string{"#"}, quotes: `'"`, markAfterGap: true},
	".py":  {line: []string{"#"}, quotes: `'"`, longStrings: [][2]string{{`"""`, `"""`}, {`'''`, `'''`}}},
	".ts":  {line: []string{"//"}, block: [][2]string{{"/*", "*/"}}, quotes: "'\"`", regexps: true},
	".js":  {line: []string{"//"}, block: [][2]string{{"/*", "*/"}}, quotes: "'\"`", regexps: true},
	".mjs": {line: []string{"//"}, block: [][2]string{{"/*", "*/"}}, quotes: "'\"`", regexps: true},
}

// isScript reports whether path is a file whose comments scriptFindings checks.
func isScript(path string) bool {
	_, ok := scripts[filepath.Ext(path)]
	return ok
}

// comment is one comment of a script: the line it starts on and its text
// without its markers.
type comment struct {
	line int
	text string
}

// scriptComments returns the comments of src, a file in the language syn
// describes. It knows strings well enough not to take a marker inside one
// for a comment; escapes inside strings are honoured, not interpolation.
func scriptComments(src string, syn syntax) []comment {
	var out []comment
	lineMarks := wrap(syn.line)
	line := 1
	for i := 0; i < len(src); {
		if src[i] == '\n' {
			line++
			i++
			continue
		}
		if end, ok := opens(src, i, syn.block); ok {
			j := strings.Index(src[i+len(end[0]):], end[1])
			stop := len(src)
			if j >= 0 {
				stop = i + len(end[0]) + j + len(end[1])
			}
			text := src[i+len(end[0]) : max(i+len(end[0]), stop-len(end[1]))]
			out = append(out, comment{line, text})
			line += strings.Count(src[i:stop], "\n")
			i = stop
			continue
		}
		if m, ok := opens(src, i, lineMarks); ok && (!syn.markAfterGap || i == 0 || strings.ContainsRune(" \t\n;", rune(src[i-1]))) {
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			out = append(out, comment{line, src[i+len(m[0]) : i+j]})
			i += j
			continue
		}
		if end, ok := opens(src, i, syn.longStrings); ok {
			j := strings.Index(src[i+len(end[0]):], end[1])
			stop := len(src)
			if j >= 0 {
				stop = i + len(end[0]) + j + len(end[1])
			}
			line += strings.Count(src[i:stop], "\n")
			i = stop
			continue
		}
		if syn.regexps && src[i] == '/' && operandAt(src, i) {
			i = regexpEnd(src, i)
			continue
		}
		if q := src[i]; strings.IndexByte(syn.quotes, q) >= 0 {
			i++
			for i < len(src) && src[i] != q {
				if src[i] == '\\' {
					i++
				}
				if i < len(src) && src[i] == '\n' {
					line++
				}
				i++
			}
			i++
			continue
		}
		i++
	}
	return out
}

// operandAt reports whether an operand may begin at src[i]: the last
// character before it that is not a space is an operator or an opening
// (or there is none), so a / there opens a regular expression, not a
// division.
func operandAt(src string, i int) bool {
	j := i - 1
	for j >= 0 && strings.IndexByte(" \t", src[j]) >= 0 {
		j--
	}
	return j < 0 || strings.IndexByte("(,=:[!&|?{};+-*%<>~^\n", src[j]) >= 0
}

// regexpEnd returns the index just past the regular expression literal
// that opens at src[i], or the line's end when it does not close on it.
func regexpEnd(src string, i int) int {
	class := false
	for i++; i < len(src) && src[i] != '\n'; i++ {
		switch c := src[i]; {
		case c == '\\':
			i++
		case c == '[':
			class = true
		case c == ']':
			class = false
		case c == '/' && !class:
			return i + 1
		}
	}
	return i
}

// opens returns the pair of pairs whose opening starts src at i.
func opens(src string, i int, pairs [][2]string) ([2]string, bool) {
	for _, p := range pairs {
		if strings.HasPrefix(src[i:], p[0]) {
			return p, true
		}
	}
	return [2]string{}, false
}

// wrap makes line markers pairs (their close, the line's end, unused).
func wrap(markers []string) [][2]string {
	out := make([][2]string, len(markers))
	for i, m := range markers {
		out[i] = [2]string{m, "\n"}
	}
	return out
}

// scriptFindings are the comments of the script at path that cite an issue
// number: the rule Go's comments keep.
func scriptFindings(path, src string) []finding {
	var out []finding
	for _, c := range scriptComments(src, scripts[filepath.Ext(path)]) {
		if issueRef.MatchString(c.text) {
			out = append(out, finding{fmt.Sprintf("%s:%d", path, c.line), "comment cites an issue number: " + strings.TrimSpace(firstLine(c.text))})
		}
	}
	return out
}
