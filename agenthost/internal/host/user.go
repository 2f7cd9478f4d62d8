package host

import (
	"fmt"
	"os/user"
	"strconv"
	"syscall"
)

// agentUser is the user the agent runs as.
type agentUser struct {
	name string
	home string
	cred *syscall.Credential
}

// lookupUser finds name (or a numeric uid) in the user database.
func lookupUser(name string) (*agentUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		u, err = user.LookupId(name)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: no user %q", ErrConfig, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: user %q has no numeric ids", ErrConfig, name)
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	return &agentUser{name: u.Username, home: u.HomeDir, cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}, nil
}
