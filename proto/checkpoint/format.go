// Package checkpoint is the definition of Rayito's open checkpoint format,
// shared by every program that writes or reads it: rayd's HOME
// checkpoints (to S3) and the E2B gateway's snapshots (in a local
// directory). A checkpoint is two objects side by side under one prefix or
// directory: a gzip-compressed tar of the user's HOME ([ArchiveName],
// "home.tar.gz") and a manifest ([ManifestName], "manifest.json", version
// 1) that names the archive's sha256 and size and is written last, so a
// checkpoint without its manifest is incomplete. docs/persistence.md
// describes the format for other tools.
//
// This package holds the manifest ([Manifest], [ParseManifest]), the rules
// of an archive's entries for a reader ([CheckHeader], [CleanPath], [Walk],
// [Scan]: nothing leaves the root, no device, FIFO or hard link, no
// setuid, setgid or sticky bit) and the layout of its entries for a writer
// ([DirHeader], [FileHeader], [SymlinkHeader]). It depends on the standard
// library only, does no I/O of its own and logs nothing: its errors name
// no path and no content.
package checkpoint

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// The format's fixed names and numbers.
const (
	// ArchiveName is the archive's object name under a checkpoint's key.
	ArchiveName = "home.tar.gz"
	// ManifestName is the manifest's object name; it is written last.
	ManifestName = "manifest.json"
	// Version is the manifest version this package writes and reads.
	// Another version is refused (ErrUnsupported).
	Version = 1
	// Format names the archive's encoding in the manifest.
	Format = "tar+gzip"
	// GzipLevel is the compression level of the archives Rayito writes
	// (fast: a checkpoint is bound by the CPU of a small sandbox first).
	GzipLevel = 1
	// MaxManifestSize bounds a manifest read back.
	MaxManifestSize = 64 << 10
)

// Errors of the format. Each is matched with errors.Is; messages name no
// path or content.
var (
	// ErrUnsupported: the manifest is not a version this package reads,
	// or not a manifest at all.
	ErrUnsupported = errors.New("checkpoint: unsupported checkpoint manifest")
	// ErrUnsafe: an archive entry would leave the root (absolute path,
	// "..", a path through a link of the archive), the archive breaks a
	// limit, or it is not a tar.gz at all.
	ErrUnsafe = errors.New("checkpoint: unsafe or malformed archive")
	// ErrChecksum: the archive's bytes do not match the manifest.
	ErrChecksum = errors.New("checkpoint: checksum mismatch")
)

// Manifest is manifest.json, version 1. Unknown fields are ignored when
// read (a later minor addition); a different Version is refused.
type Manifest struct {
	Version int `json:"version"`
	// Format is "tar+gzip".
	Format string `json:"format"`
	// Archive is the archive's object name, "home.tar.gz".
	Archive string `json:"archive"`
	// SHA256 is the archive's sha256, 64 lowercase hex characters.
	SHA256 string `json:"sha256"`
	// Size is the archive's size in bytes.
	Size int64 `json:"size"`
	// CreatedAt is when the checkpoint was taken (UTC, RFC 3339).
	CreatedAt time.Time `json:"created_at"`
	// Counts of what the archive holds.
	Files        uint64 `json:"files"`
	Directories  uint64 `json:"directories"`
	Symlinks     uint64 `json:"symlinks"`
	ContentBytes uint64 `json:"content_bytes"`
	// Producer names the program that wrote it, e.g. "rayd/0.1.0".
	Producer string `json:"producer,omitempty"`
}

// Encode renders m as indented JSON with a final newline.
func (m *Manifest) Encode() []byte {
	b, _ := json.MarshalIndent(m, "", "  ")
	return append(b, '\n')
}

// ParseManifest reads a manifest (at most MaxManifestSize bytes) and
// checks it: version 1, format tar+gzip, the archive home.tar.gz, a
// well-formed sha256 and a size. Anything else is ErrUnsupported.
func ParseManifest(r io.Reader) (*Manifest, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxManifestSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrUnsupported, MaxManifestSize)
	}
	var probe struct {
		Version *int `json:"version"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&probe); err != nil || probe.Version == nil {
		return nil, fmt.Errorf("%w: not a checkpoint manifest", ErrUnsupported)
	}
	if *probe.Version != Version {
		return nil, fmt.Errorf("%w: version %d (this program reads version %d)", ErrUnsupported, *probe.Version, Version)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: not a checkpoint manifest", ErrUnsupported)
	}
	switch {
	case m.Format != Format:
		return nil, fmt.Errorf("%w: format is not %s", ErrUnsupported, Format)
	case m.Archive != ArchiveName:
		return nil, fmt.Errorf("%w: the archive is not %s", ErrUnsupported, ArchiveName)
	case !ValidSHA256(m.SHA256):
		return nil, fmt.Errorf("%w: sha256 is not 64 lowercase hex characters", ErrUnsupported)
	case m.Size < 0:
		return nil, fmt.Errorf("%w: negative size", ErrUnsupported)
	}
	return &m, nil
}

// ValidSHA256 reports whether s is 64 lowercase hex characters.
func ValidSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
