package identity

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
)

// passwdEntry is one well-formed line of a passwd file.
type passwdEntry struct {
	Name     string
	UID, GID uint32
	Home     string
	Shell    string
}

// groupEntry is one well-formed line of a group file.
type groupEntry struct {
	Name    string
	GID     uint32
	Members []string
}

// errLineTooLong is returned when a line exceeds MaxLineLength.
var errLineTooLong = errors.New("identity: account database line exceeds length limit")

// forEachLine calls fn for every line of data that is neither empty nor a
// comment, enforcing the file and line bounds. Trailing "\r" bytes are
// removed (CRLF files); lines with a "\r" or NUL elsewhere are skipped.
func forEachLine(data []byte, fn func(line string)) error {
	if len(data) > MaxFileSize {
		return errFileTooLarge
	}
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if len(line) > MaxLineLength {
			return errLineTooLong
		}
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 || bytes.ContainsAny(line, "\r\x00") {
			// Blank, or carriage returns / NULs inside the line: no
			// well-formed account looks like that.
			continue
		}
		switch line[0] {
		case '#', '+', '-':
			// Comments and NIS compatibility entries are not accounts.
			continue
		}
		fn(string(line))
	}
	return nil
}

// parseID parses a decimal uid or gid. Signs, blanks and values that do not
// fit in 32 bits are rejected.
func parseID(s string) (uint32, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(v), true
}

// parsePasswd parses a passwd(5) file:
//
//	name:password:uid:gid:gecos:home:shell
//
// Malformed lines (wrong field count, empty name, non-numeric ids) are
// skipped, as the C library does; only the size bounds are errors.
func parsePasswd(data []byte) ([]passwdEntry, error) {
	var out []passwdEntry
	err := forEachLine(data, func(line string) {
		f := strings.Split(line, ":")
		if len(f) != 7 || f[0] == "" {
			return
		}
		uid, ok1 := parseID(f[2])
		gid, ok2 := parseID(f[3])
		if !ok1 || !ok2 {
			return
		}
		out = append(out, passwdEntry{Name: f[0], UID: uid, GID: gid, Home: f[5], Shell: f[6]})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseGroup parses a group(5) file:
//
//	name:password:gid:member1,member2,...
//
// Malformed lines are skipped; empty member names are ignored.
func parseGroup(data []byte) ([]groupEntry, error) {
	var out []groupEntry
	err := forEachLine(data, func(line string) {
		f := strings.Split(line, ":")
		if len(f) != 4 || f[0] == "" {
			return
		}
		gid, ok := parseID(f[2])
		if !ok {
			return
		}
		var members []string
		for m := range strings.SplitSeq(f[3], ",") {
			if m != "" {
				members = append(members, m)
			}
		}
		out = append(out, groupEntry{Name: f[0], GID: gid, Members: members})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
