// Package command is `ax bench`: its cobra command with the flags of every
// mode, the progress bar and the printing of summaries and comparisons.
package command
