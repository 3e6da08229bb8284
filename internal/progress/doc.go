// Package progress draws a one-line progress bar on a terminal, for the
// CLI's long commands (ax submit -f, ax bench).
package progress
