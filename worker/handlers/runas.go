package handlers

import (
	"errors"
	"fmt"
	"os/user"
	"regexp"
	"strconv"
	"strings"
)

// account is the user and group a command runs as.
type account struct {
	uid, gid uint32
}

var runAsRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)

// CheckRunAs checks the form of a run-as setting: "" (the worker's own
// user), "user", "user:group", "uid:gid" or "uid" (of a user the system
// knows, for its group). Whether the user and group exist is checked where
// the commands run (Exec).
func CheckRunAs(s string) error {
	if s == "" || runAsRe.MatchString(s) {
		return nil
	}
	return fmt.Errorf("%q: want user, user:group, uid or uid:gid", s)
}

// lookupRunAs resolves a run-as setting (CheckRunAs) into ids; nil for "".
func lookupRunAs(s string) (*account, error) {
	if s == "" {
		return nil, nil
	}
	if err := CheckRunAs(s); err != nil {
		return nil, err
	}
	name, group, hasGroup := strings.Cut(s, ":")
	var a account
	var u *user.User
	if id, err := strconv.ParseUint(name, 10, 32); err == nil {
		a.uid = uint32(id)
		u, _ = user.LookupId(name)
	} else {
		if u, err = user.Lookup(name); err != nil {
			return nil, fmt.Errorf("%q: %v", s, err)
		}
		if a.uid, err = parseID(u.Uid); err != nil {
			return nil, fmt.Errorf("%q: uid %v", s, err)
		}
	}
	switch {
	case hasGroup:
		gid, err := strconv.ParseUint(group, 10, 32)
		if err != nil {
			g, lerr := user.LookupGroup(group)
			if lerr != nil {
				return nil, fmt.Errorf("%q: %v", s, lerr)
			}
			gid, err = strconv.ParseUint(g.Gid, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%q: gid %q: %v", s, g.Gid, err)
			}
		}
		a.gid = uint32(gid)
	case u != nil:
		gid, err := parseID(u.Gid)
		if err != nil {
			return nil, fmt.Errorf("%q: gid %v", s, err)
		}
		a.gid = gid
	default:
		return nil, fmt.Errorf("%q: no such user to take the group from: give uid:gid", s)
	}
	if a.uid == 0 {
		return nil, errors.New(`run as root: a command running as root can read every secret of the host; leave run_as empty to run as the worker's own user`)
	}
	return &a, nil
}

func parseID(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	return uint32(v), err
}
