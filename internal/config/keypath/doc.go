// Package keypath names the keys of a configuration schema: paths as
// errors print them, the keys of a struct read from its mapstructure tags,
// and the known key closest to a misspelt one.
package keypath
