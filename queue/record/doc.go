// Package record is the codec of a stored task: the short field names of
// its Redis hash, state codes, tags, durations and times, in both
// directions. It knows nothing of Redis clients or keys.
package record
