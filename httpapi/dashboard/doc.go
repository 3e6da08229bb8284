// Package dashboard serves ax's dashboard: one HTML page, a script and a
// style sheet, embedded, calling the same /v1 API as the CLI.
package dashboard
