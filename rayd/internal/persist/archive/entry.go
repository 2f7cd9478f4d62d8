package archive

import (
	"archive/tar"

	"github.com/rayito-dev/rayito/proto/checkpoint"
)

// The rules of an archive's entries are package checkpoint's; these names
// are theirs.

// Limits of an archive read back.
const (
	MaxPathLen    = checkpoint.MaxPathLen
	MaxDepth      = checkpoint.MaxDepth
	MaxLinkTarget = checkpoint.MaxLinkTarget
	MaxEntries    = checkpoint.MaxEntries
)

type (
	// Kind is what an archive entry becomes.
	Kind = checkpoint.Kind
	// Skip is why an entry is left out.
	Skip = checkpoint.Skip
	// Entry is the checked form of one tar header.
	Entry = checkpoint.Entry
	// Plan is what Scan found in an archive: what Extract will make.
	Plan = checkpoint.Plan
	// Skipped counts entries left out or changed.
	Skipped = checkpoint.Skipped
)

// Kinds of entries, and reasons to leave one out.
const (
	KindSkip    = checkpoint.KindSkip
	KindDir     = checkpoint.KindDir
	KindFile    = checkpoint.KindFile
	KindSymlink = checkpoint.KindSymlink

	SkipNone     = checkpoint.SkipNone
	SkipRoot     = checkpoint.SkipRoot
	SkipSpecial  = checkpoint.SkipSpecial
	SkipHardLink = checkpoint.SkipHardLink
	SkipOther    = checkpoint.SkipOther
)

// ErrTooBig is Scan's error when the archive's files would not fit the
// bound it was given (it also matches ErrUnsafe).
var ErrTooBig = checkpoint.ErrTooBig

// CheckHeader is checkpoint.CheckHeader.
func CheckHeader(h *tar.Header) (Entry, error) { return checkpoint.CheckHeader(h) }

// CleanPath is checkpoint.CleanPath.
func CleanPath(name string) (string, error) { return checkpoint.CleanPath(name) }

// Scan is checkpoint.Scan: every entry checked before anything is
// extracted, at most maxContent bytes of file contents (0: no bound).
var Scan = checkpoint.Scan
