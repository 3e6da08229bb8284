package task

import "encoding/hex"

// TraceIDFor derives a stable W3C trace id from a task id when the client
// gave none, so no bytes are spent storing a generated one.
func TraceIDFor(id string) string {
	var b [16]byte
	copy(b[:], id)
	for i := 16; i < len(id); i++ {
		b[i%16] ^= id[i]
	}
	return hex.EncodeToString(b[:])
}
