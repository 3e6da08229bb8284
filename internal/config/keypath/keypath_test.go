package keypath

import (
	"reflect"
	"testing"
)

func TestPathsAndSuggestions(t *testing.T) {
	type redis struct {
		Addr       string `mapstructure:"addr"`
		MasterName string `mapstructure:"master_name"`
	}
	fields := Fields(reflect.TypeFor[redis]())
	for _, c := range []struct{ got, want string }{
		{Join("", "redis"), "redis"},
		{Join(Elem("pools", 2), "slots"), "pools[2].slots"},
		{Entry("pools[0].tags", "a.b"), "pools[0].tags[a.b]"},
		{Suggest("adr", fields), ` (did you mean "addr"?)`},
		{Suggest("master", fields), ` (did you mean "master_name"?)`},
		{Suggest("nothing_like_it", fields), ""},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
