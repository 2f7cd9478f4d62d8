// Package compat says whether an SDK release can drive a given rayd (the
// guest daemon), from the daemon's version as Health reports it
// (HealthResponse.agent_version).
//
// # Versions
//
// Versions are semantic versions MAJOR.MINOR.PATCH with an optional
// pre-release ("-dev", "-rc.1") and build metadata ("+meta"), as rayd
// reports them ("0.1.0", "0.1.0-dev"). A leading "v" is accepted. Only
// MAJOR.MINOR matters for compatibility: the patch, the pre-release and the
// build metadata are ignored, so a pre-release of a minor counts as that
// minor ("0.2.0-dev" is 0.2, not "before 0.2.0"). See ParseVersion for the
// exact syntax.
//
// # The table
//
// Table lists, per SDK minor, the range of rayd minors that SDK works with
// (both ends included). Default returns the table of this release; it
// grows by one row per SDK minor and a released row never changes, except
// that its RaydMax may be raised when a later rayd is verified to keep
// serving an SDK that is already released (that only helps SDKs built
// afterwards).
//
// # Rules
//
// Check(sdk, rayd) looks up the row of the SDK's minor (none: an error
// wrapping ErrUnknownSDK) and places the rayd's minor against it:
//
//   - below RaydMin: incompatible (rayd too old for this SDK);
//   - within [RaydMin, RaydMax] and not newer than the SDK's own minor:
//     Compatible;
//   - within the range but newer than the SDK's own minor: CompatibleNewer
//     (rayd may offer features this SDK does not know: callers warn once);
//   - above RaydMax: incompatible if any row of the table mentions that
//     rayd minor or a later one (the table knows and excludes it).
//     Otherwise the rayd is newer than anything the table knows, and then
//     the major decides. In major 0 every minor may break the contract
//     (semver's rule for 0.y.z), so an unknown newer 0.y is incompatible.
//     From major 1 on a minor only adds, so an unknown newer minor of the
//     same major as RaydMax is CompatibleNewer; a new major is
//     incompatible.
//
// Incompatibilities are *IncompatibleError values (errors.Is
// ErrIncompatible) carrying both versions; a version that does not parse
// is an error wrapping ErrInvalidVersion. Every error comes with the
// Incompatible result, so a caller that ignores the error still fails
// closed.
//
// The package is pure Go, uses only the standard library and does no I/O.
package compat

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Row is one line of the table: the SDK minor SDK ("MAJOR.MINOR") works
// with every rayd minor from RaydMin to RaydMax, both included.
type Row struct {
	SDK     string
	RaydMin string
	RaydMax string
}

// Table is the compatibility table: at most one row per SDK minor.
type Table []Row

// Default returns the table of this release (a fresh copy: changing it
// changes nothing elsewhere).
func Default() Table {
	return Table{
		{SDK: "0.1", RaydMin: "0.1", RaydMax: "0.1"},
	}
}

// Result is the outcome of Check.
type Result int

// The results. The zero value is Incompatible: every error comes with it.
const (
	// Incompatible: the SDK cannot drive this rayd; the error says why.
	Incompatible Result = iota
	// Compatible: the rayd's minor is in the SDK's range and not newer
	// than the SDK's own minor.
	Compatible
	// CompatibleNewer: compatible, but the rayd is a newer minor than the
	// SDK's own, and may offer features the SDK does not know. Warn once.
	CompatibleNewer
)

func (r Result) String() string {
	switch r {
	case Incompatible:
		return "incompatible"
	case Compatible:
		return "compatible"
	case CompatibleNewer:
		return "compatible (newer rayd)"
	default:
		return "Result(" + strconv.Itoa(int(r)) + ")"
	}
}

// Sentinels for errors.Is.
var (
	// ErrIncompatible: the SDK cannot drive this rayd (see
	// *IncompatibleError).
	ErrIncompatible = errors.New("compat: incompatible versions")
	// ErrInvalidVersion: a version is not a semantic version.
	ErrInvalidVersion = errors.New("compat: invalid version")
	// ErrUnknownSDK: the table has no row for the SDK's minor.
	ErrUnknownSDK = errors.New("compat: SDK version not in the compatibility table")
	// ErrInvalidTable: a row of the table is malformed (see
	// Table.Validate).
	ErrInvalidTable = errors.New("compat: invalid compatibility table")
)

// IncompatibleError says that an SDK cannot drive a rayd. The versions are
// as given to Check.
type IncompatibleError struct {
	SDKVersion  string
	RaydVersion string
	// Reason is a short fixed explanation with the SDK's supported range.
	Reason string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("compat: SDK %s cannot drive rayd %s: %s", e.SDKVersion, e.RaydVersion, e.Reason)
}

// Is lets errors.Is(err, ErrIncompatible) match.
func (e *IncompatibleError) Is(target error) bool { return target == ErrIncompatible }

// Check places rayd's version against the row of sdk's minor in the
// default table. See the package documentation for the rules.
func Check(sdkVersion, raydVersion string) (Result, error) {
	return Default().Check(sdkVersion, raydVersion)
}

// Check places rayd's version against the row of sdk's minor in t. See
// the package documentation for the rules. It never panics, whatever the
// inputs.
func (t Table) Check(sdkVersion, raydVersion string) (Result, error) {
	sv, err := ParseVersion(sdkVersion)
	if err != nil {
		return Incompatible, fmt.Errorf("SDK version %s: %w", quote(sdkVersion), err)
	}
	rv, err := ParseVersion(raydVersion)
	if err != nil {
		return Incompatible, fmt.Errorf("rayd version %s: %w", quote(raydVersion), err)
	}
	s := minor{sv.Major, sv.Minor}
	var row *Row
	var newest minor // the newest rayd minor any row mentions
	for i := range t {
		lo, hi, rs, err := t[i].parse()
		if err != nil {
			return Incompatible, err
		}
		if rs == s {
			if row != nil {
				return Incompatible, fmt.Errorf("%w: two rows for SDK %s", ErrInvalidTable, t[i].SDK)
			}
			row = &t[i]
		}
		newest = maxMinor(newest, maxMinor(lo, hi))
	}
	if row == nil {
		return Incompatible, fmt.Errorf("%w: %d.%d", ErrUnknownSDK, s.major, s.minor)
	}
	lo, hi, _, _ := row.parse()
	r := minor{rv.Major, rv.Minor}
	incompatible := func(reason string) (Result, error) {
		return Incompatible, &IncompatibleError{
			SDKVersion: sdkVersion, RaydVersion: raydVersion,
			Reason: fmt.Sprintf("%s (SDK %s works with rayd %s to %s)", reason, row.SDK, row.RaydMin, row.RaydMax),
		}
	}
	switch {
	case r.less(lo):
		return incompatible("rayd is older than this SDK supports")
	case !hi.less(r): // lo <= r <= hi
		if s.less(r) {
			return CompatibleNewer, nil
		}
		return Compatible, nil
	case !newest.less(r): // the table knows r, and this row leaves it out
		return incompatible("rayd is newer than this SDK supports")
	case r.major == 0:
		return incompatible("rayd is newer than this SDK knows, and in major 0 every minor may break")
	case r.major == hi.major:
		return CompatibleNewer, nil
	default:
		return incompatible("rayd is a newer major than this SDK knows")
	}
}

// Validate checks every row: SDK, RaydMin and RaydMax are "MAJOR.MINOR",
// RaydMin is not above RaydMax, and no SDK minor has two rows. Errors wrap
// ErrInvalidTable.
func (t Table) Validate() error {
	seen := map[minor]bool{}
	for i := range t {
		_, _, s, err := t[i].parse()
		if err != nil {
			return err
		}
		if seen[s] {
			return fmt.Errorf("%w: two rows for SDK %s", ErrInvalidTable, t[i].SDK)
		}
		seen[s] = true
	}
	return nil
}

// parse reads a row's three minors.
func (r *Row) parse() (lo, hi, sdk minor, err error) {
	var ok [3]bool
	sdk, ok[0] = parseMinor(r.SDK)
	lo, ok[1] = parseMinor(r.RaydMin)
	hi, ok[2] = parseMinor(r.RaydMax)
	if !ok[0] || !ok[1] || !ok[2] {
		return lo, hi, sdk, fmt.Errorf("%w: row %s: want MAJOR.MINOR", ErrInvalidTable, quote(r.SDK+" "+r.RaydMin+" "+r.RaydMax))
	}
	if hi.less(lo) {
		return lo, hi, sdk, fmt.Errorf("%w: row for SDK %s: RaydMin %s is above RaydMax %s", ErrInvalidTable, r.SDK, r.RaydMin, r.RaydMax)
	}
	return lo, hi, sdk, nil
}

// minor is a MAJOR.MINOR pair.
type minor struct{ major, minor int }

func (a minor) less(b minor) bool {
	return a.major < b.major || a.major == b.major && a.minor < b.minor
}

func maxMinor(a, b minor) minor {
	if a.less(b) {
		return b
	}
	return a
}

// parseMinor reads "MAJOR.MINOR".
func parseMinor(s string) (minor, bool) {
	maj, rest, ok := strings.Cut(s, ".")
	if !ok {
		return minor{}, false
	}
	a, ok1 := parseNum(maj)
	b, ok2 := parseNum(rest)
	return minor{a, b}, ok1 && ok2
}

// Version is a parsed semantic version.
type Version struct {
	Major, Minor, Patch int
	// Prerelease is what follows "-" (without it), Build what follows "+".
	Prerelease, Build string
}

// String is the canonical form, without a leading "v".
func (v Version) String() string {
	s := strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) + "." + strconv.Itoa(v.Patch)
	if v.Prerelease != "" {
		s += "-" + v.Prerelease
	}
	if v.Build != "" {
		s += "+" + v.Build
	}
	return s
}

// MaxVersionLen is the longest version ParseVersion accepts, in bytes.
const MaxVersionLen = 128

// maxNumDigits bounds each number so it fits any int.
const maxNumDigits = 9

// ParseVersion parses a semantic version 2.0.0
// (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]) with an optional leading "v".
// Each number has 1 to 9 digits and no leading zero; the pre-release and
// the build are dot-separated non-empty identifiers of [0-9A-Za-z-], and a
// numeric pre-release identifier has no leading zero. At most
// MaxVersionLen bytes. Errors wrap ErrInvalidVersion and do not repeat the
// input.
func ParseVersion(s string) (Version, error) {
	bad := func(why string) (Version, error) {
		return Version{}, fmt.Errorf("%w: %s", ErrInvalidVersion, why)
	}
	if len(s) > MaxVersionLen {
		return bad("too long")
	}
	s = strings.TrimPrefix(s, "v")
	s, build, hasBuild := strings.Cut(s, "+")
	s, pre, hasPre := strings.Cut(s, "-")
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return bad("want MAJOR.MINOR.PATCH")
	}
	var v Version
	var ok [3]bool
	v.Major, ok[0] = parseNum(parts[0])
	v.Minor, ok[1] = parseNum(parts[1])
	v.Patch, ok[2] = parseNum(parts[2])
	if !ok[0] || !ok[1] || !ok[2] {
		return bad("a number is empty, too long, not decimal or has a leading zero")
	}
	if hasPre {
		if !identifiers(pre, true) {
			return bad("malformed pre-release")
		}
		v.Prerelease = pre
	}
	if hasBuild {
		if !identifiers(build, false) {
			return bad("malformed build metadata")
		}
		v.Build = build
	}
	return v, nil
}

// parseNum reads 1 to maxNumDigits decimal digits without a leading zero.
func parseNum(s string) (int, bool) {
	if s == "" || len(s) > maxNumDigits || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// identifiers checks dot-separated non-empty identifiers of [0-9A-Za-z-];
// with pre, a numeric identifier may not have a leading zero.
func identifiers(s string, pre bool) bool {
	for id := range strings.SplitSeq(s, ".") {
		if id == "" {
			return false
		}
		numeric := true
		for i := 0; i < len(id); i++ {
			c := id[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			default:
				return false
			}
		}
		if pre && numeric && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

// quote quotes a version for an error, cut to MaxVersionLen bytes.
func quote(s string) string {
	if len(s) > MaxVersionLen {
		s = s[:MaxVersionLen] + "…"
	}
	return strconv.Quote(s)
}
