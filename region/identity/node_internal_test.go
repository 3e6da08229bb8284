package identity

import "testing"

// keySlot is Redis Cluster's (CLUSTER KEYSLOT), and slotKey's tag hashes
// to its slot.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{"123456789": 0x31c3, "foo": 12182, "bar": 5061, "": 0} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	tags := slotTags()
	for _, s := range []int{0, 1, 5461, 10923, slots - 1} {
		if got := keySlot(tags[s]); got != s {
			t.Errorf("the tag of slot %d (%q) hashes to %d", s, tags[s], got)
		}
	}
}
