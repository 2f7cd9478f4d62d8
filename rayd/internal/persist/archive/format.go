// Package archive is rayd's side of the open checkpoint format: a
// gzip-compressed tar of the user's HOME (home.tar.gz) beside a manifest
// (manifest.json) that names the archive's sha256 and is written last.
// The format itself (the manifest, the entries' rules and layout) is
// defined once, in the proto module's package checkpoint, which the E2B
// gateway shares; this package re-exports its names for rayd, writes the
// format from a directory tree read as the user (Pack), checks an archive
// entry by entry before anything is written (Scan, CheckHeader), and
// extracts it as the user (Extract), through rayd's safe file layer.
// docs/persistence.md describes the format for other tools.
//
// Nothing here talks to S3 (package persist does) and nothing logs: the
// errors name no path, no pattern and no content.
package archive

import (
	"errors"
	"io"

	"github.com/rayito-dev/rayito/proto/checkpoint"
)

// The format's fixed names and numbers (package checkpoint's).
const (
	// ArchiveName is the archive's object name under a checkpoint's key.
	ArchiveName = checkpoint.ArchiveName
	// ManifestName is the manifest's object name; it is written last.
	ManifestName = checkpoint.ManifestName
	// Version is the manifest version this package writes and reads.
	Version = checkpoint.Version
	// Format names the archive's encoding in the manifest.
	Format = checkpoint.Format
	// GzipLevel is the compression level of the archives rayd writes.
	GzipLevel = checkpoint.GzipLevel
	// MaxManifestSize bounds a manifest read back.
	MaxManifestSize = checkpoint.MaxManifestSize
)

// PartSize is the size of a multipart upload's parts.
const PartSize = 8 << 20

// Errors of the format (package checkpoint's, matched with errors.Is),
// and rayd's own.
var (
	ErrUnsupported = checkpoint.ErrUnsupported
	ErrUnsafe      = checkpoint.ErrUnsafe
	ErrChecksum    = checkpoint.ErrChecksum
	// ErrBadExclude: an exclude pattern is invalid (or there are too many).
	ErrBadExclude = errors.New("archive: invalid exclude pattern")
)

// Manifest is manifest.json, version 1 (checkpoint.Manifest).
type Manifest = checkpoint.Manifest

// ParseManifest is checkpoint.ParseManifest.
func ParseManifest(r io.Reader) (*Manifest, error) { return checkpoint.ParseManifest(r) }

// ValidSHA256 is checkpoint.ValidSHA256.
func ValidSHA256(s string) bool { return checkpoint.ValidSHA256(s) }
