// Package identity resolves the Unix account that a sandboxed command runs as.
//
// A [Resolver] reads the passwd and group databases itself (it never calls
// into libc or NSS), applies rayd's account policy and returns an [Identity]
// that the process supervisor turns into setuid/setgid/setgroups calls for
// the child.
//
// The policy is:
//
//   - An empty username means "user".
//   - "root" is accepted only when [Resolver.AllowRoot] is set (rayd sets it
//     from RAYITO_ALLOW_ROOT=1 in its own environment); it always resolves to
//     uid 0, gid 0.
//   - Any other account must exist in the passwd file, have a uid and a
//     primary gid in 1000..65535, and must not be a member of group 0
//     (neither as its primary group nor through a supplementary group whose
//     member list names it).
//
// The checks run in that order; the first failing one gives the reason
// (a primary gid of 0 is reported as "in_group_0" rather than
// "gid_out_of_range").
//
// A refusal is reported as a [*DeniedError], whose Reason field carries a
// stable machine-readable code; its message names the account and nothing
// else, so it is safe to return to an RPC client.
//
// Both files are parsed with hard bounds: a file larger than [MaxFileSize]
// or a line longer than [MaxLineLength] is rejected as a whole rather than
// partially interpreted.
package identity

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
)

// Identity is a resolved account.
type Identity struct {
	Username string
	UID, GID uint32
	// Groups is the complete group list for setgroups(2): the primary GID
	// first, followed by the GIDs of every group whose member list names the
	// user, without duplicates.
	Groups []uint32
	Home   string // defaults to /home/<username> when the passwd entry has none
	Shell  string // defaults to /bin/sh when the passwd entry has none
}

// Default file locations and bounds.
const (
	DefaultPasswdPath = "/etc/passwd"
	DefaultGroupPath  = "/etc/group"
	DefaultUsername   = "user"

	// MaxFileSize is the largest passwd or group file that is parsed.
	MaxFileSize = 4 << 20
	// MaxLineLength is the longest line accepted in either file.
	MaxLineLength = 64 << 10

	// MinID and MaxID bound the uid and gid of every account other than root.
	MinID = 1000
	MaxID = 65535

	maxUsernameLen = 256
)

// Reasons carried by [DeniedError].
const (
	ReasonUnknownUser    = "unknown_user"
	ReasonRootNotAllowed = "root_not_allowed"
	ReasonUIDOutOfRange  = "uid_out_of_range"
	ReasonGIDOutOfRange  = "gid_out_of_range"
	ReasonInGroup0       = "in_group_0"
)

// DeniedError reports that an account may not be used. Use [errors.As] to
// obtain it. Reason is one of the Reason* constants.
type DeniedError struct {
	Username string
	Reason   string
}

// Error names the account only; the reason is deliberately left out of the
// message (it is available in the Reason field).
func (e *DeniedError) Error() string {
	return fmt.Sprintf("identity: user %q is not permitted", e.Username)
}

// Resolver resolves usernames against a passwd and a group file.
// The zero value reads /etc/passwd and /etc/group and refuses root.
// A Resolver holds no state between calls and is safe for concurrent use.
type Resolver struct {
	PasswdPath string // default /etc/passwd
	GroupPath  string // default /etc/group
	AllowRoot  bool
}

// Resolve returns the identity for username ("" means "user").
//
// Policy refusals are returned as a [*DeniedError]. Other errors (an
// unreadable or oversized file, an over-long line) are returned as is and
// mean the databases could not be trusted; they never yield an identity.
func (r *Resolver) Resolve(username string) (Identity, error) {
	if username == "" {
		username = DefaultUsername
	}
	if !validUsername(username) {
		return Identity{}, &DeniedError{Username: username, Reason: ReasonUnknownUser}
	}
	passwdPath, groupPath := r.paths()

	if username == "root" {
		if !r.AllowRoot {
			return Identity{}, &DeniedError{Username: username, Reason: ReasonRootNotAllowed}
		}
		id := Identity{Username: "root", UID: 0, GID: 0, Groups: []uint32{0}, Home: "/root", Shell: "/bin/sh"}
		// Home and shell come from the passwd entry when there is one; the
		// ids are always 0 whatever the file says.
		data, err := readBounded(passwdPath)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return Identity{}, err
		}
		entries, err := parsePasswd(data)
		if err != nil {
			return Identity{}, err
		}
		if e, ok := findUser(entries, "root"); ok {
			if e.Home != "" {
				id.Home = e.Home
			}
			if e.Shell != "" {
				id.Shell = e.Shell
			}
		}
		return id, nil
	}

	data, err := readBounded(passwdPath)
	if err != nil {
		return Identity{}, err
	}
	users, err := parsePasswd(data)
	if err != nil {
		return Identity{}, err
	}
	u, ok := findUser(users, username)
	if !ok {
		return Identity{}, &DeniedError{Username: username, Reason: ReasonUnknownUser}
	}
	return r.check(u, groupPath)
}

// ResolveUID returns the identity of the first passwd entry with the given
// uid, under the same policy as Resolve (uid 0 is root and needs
// AllowRoot). When no entry has the uid the error is a [*DeniedError] with
// reason "unknown_user" whose Username is the uid in decimal.
func (r *Resolver) ResolveUID(uid uint32) (Identity, error) {
	if uid == 0 {
		return r.Resolve("root")
	}
	passwdPath, groupPath := r.paths()
	data, err := readBounded(passwdPath)
	if err != nil {
		return Identity{}, err
	}
	users, err := parsePasswd(data)
	if err != nil {
		return Identity{}, err
	}
	for _, u := range users {
		if u.UID == uid {
			if u.Name == "root" {
				// Not uid 0, but the name is reserved for uid 0.
				return Identity{}, &DeniedError{Username: u.Name, Reason: ReasonRootNotAllowed}
			}
			return r.check(u, groupPath)
		}
	}
	return Identity{}, &DeniedError{Username: strconv.FormatUint(uint64(uid), 10), Reason: ReasonUnknownUser}
}

func (r *Resolver) paths() (passwd, group string) {
	passwd, group = r.PasswdPath, r.GroupPath
	if passwd == "" {
		passwd = DefaultPasswdPath
	}
	if group == "" {
		group = DefaultGroupPath
	}
	return passwd, group
}

// check applies the policy for a non-root account found in the passwd file.
func (r *Resolver) check(u passwdEntry, groupPath string) (Identity, error) {
	username := u.Name
	if u.UID < MinID || u.UID > MaxID {
		return Identity{}, &DeniedError{Username: username, Reason: ReasonUIDOutOfRange}
	}
	if u.GID == 0 {
		return Identity{}, &DeniedError{Username: username, Reason: ReasonInGroup0}
	}
	if u.GID < MinID || u.GID > MaxID {
		return Identity{}, &DeniedError{Username: username, Reason: ReasonGIDOutOfRange}
	}

	data, err := readBounded(groupPath)
	if err != nil {
		return Identity{}, err
	}
	groups, err := parseGroup(data)
	if err != nil {
		return Identity{}, err
	}
	gids := []uint32{u.GID}
	for _, g := range groups {
		if !slices.Contains(g.Members, username) {
			continue
		}
		if g.GID == 0 {
			return Identity{}, &DeniedError{Username: username, Reason: ReasonInGroup0}
		}
		if !slices.Contains(gids, g.GID) {
			gids = append(gids, g.GID)
		}
	}

	id := Identity{
		Username: username,
		UID:      u.UID,
		GID:      u.GID,
		Groups:   gids,
		Home:     u.Home,
		Shell:    u.Shell,
	}
	if id.Home == "" {
		id.Home = "/home/" + username
	}
	if id.Shell == "" {
		id.Shell = "/bin/sh"
	}
	return id, nil
}

// validUsername rejects names that cannot appear in a passwd file (and so
// could only ever be unknown) before any file is read.
func validUsername(name string) bool {
	if len(name) > maxUsernameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == ':' || c == ',' || c == '\n' || c == '\r' || c == 0:
			return false
		case c < 0x20 || c == 0x7f:
			return false
		}
	}
	return true
}

func findUser(entries []passwdEntry, name string) (passwdEntry, bool) {
	// The first entry wins, as with glibc's files backend.
	for _, e := range entries {
		if e.Name == name {
			return e, true
		}
	}
	return passwdEntry{}, false
}

// errFileTooLarge is returned for a passwd or group file above MaxFileSize.
var errFileTooLarge = errors.New("identity: account database exceeds size limit")

// readBounded reads at most MaxFileSize bytes of path; a larger file is an
// error rather than a silently truncated read.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("identity: open account database: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("identity: read account database: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, errFileTooLarge
	}
	return data, nil
}
