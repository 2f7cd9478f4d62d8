// Package files implements FilesystemService on top of the safe file layer
// (internal/safefs): every path goes through safefs with the identity of
// the request's user. One file per RPC; http.go serves the HTTP/1.1 file
// endpoints for large transfers; watch_dir.go serves WatchDir over inotify.
// checkpoint.go and restore.go serve HOME persistence (package persist);
// start_import.go, start_export.go, get_transfer.go, watch_transfer.go and
// cancel_transfer.go the pre-signed transfers (package transfer).
package files

import (
	"io/fs"
	"log/slog"
	"sync/atomic"

	"golang.org/x/sys/unix"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/persist"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
	"github.com/rayito-dev/rayito/rayd/internal/transfer"
)

// Sizes of the streamed data.
const (
	// ReadChunk is the size of a Read chunk.
	ReadChunk = 256 << 10
	// MaxWriteChunk bounds one Write chunk.
	MaxWriteChunk = 1 << 20
)

// Service implements raydv1connect.FilesystemServiceHandler.
type Service struct {
	raydv1connect.UnimplementedFilesystemServiceHandler

	state   *sandbox.State
	builder *launch.Builder
	fs      *safefs.FS
	log     *slog.Logger

	// watchStreams counts the live WatchDir streams (shared with the
	// services made by WithFS).
	watchStreams *atomic.Int64
	// persist runs checkpoints and restores (nil: Unimplemented).
	persist *persist.Manager
	// transfers runs pre-signed transfers (nil: Unimplemented).
	transfers *transfer.Manager
}

var _ raydv1connect.FilesystemServiceHandler = (*Service)(nil)

// New returns the service.
func New(state *sandbox.State, builder *launch.Builder, fsys *safefs.FS, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{state: state, builder: builder, fs: fsys, log: log, watchStreams: new(atomic.Int64)}
}

// SetPersist gives the service the sandbox's checkpoint manager.
func (s *Service) SetPersist(m *persist.Manager) { s.persist = m }

// SetTransfers gives the service the sandbox's transfer manager.
func (s *Service) SetTransfers(m *transfer.Manager) { s.transfers = m }

// WithFS returns the same service over another file layer (rayd's E2B
// envd surface uses one made with safefs.Options.Envd); both count their
// WatchDir streams against one limit.
func (s *Service) WithFS(fsys *safefs.FS) *Service {
	c := *s
	c.fs = fsys
	return &c
}

// user resolves the request's user (nil or "" = the sandbox's default) to
// the safefs identity. The auth interceptor already refused calls before
// /run, so a missing boot is answered like a missing token.
func (s *Service) user(u *raydv1.User) (safefs.User, error) {
	return s.userNamed(u.GetUsername())
}

// User resolves a user by name ("" = the sandbox's default) under the
// identity rules, for the E2B envd adapters that act for a user.
func (s *Service) User(name string) (safefs.User, error) { return s.userNamed(name) }

func (s *Service) userNamed(name string) (safefs.User, error) {
	boot := s.state.Boot()
	if boot == nil {
		return safefs.User{}, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
	}
	id, err := s.builder.Identity(boot, name)
	if err != nil {
		return safefs.User{}, err
	}
	return safefs.User{UID: id.UID, GID: id.GID, Groups: id.Groups, Home: id.Home}, nil
}

// entryInfo renders a safefs entry.
func entryInfo(e safefs.Entry) *raydv1.EntryInfo {
	info := &raydv1.EntryInfo{
		Name:               e.Name,
		Type:               fileType(e.Type),
		Path:               e.Path,
		Size:               e.Size,
		Mode:               stMode(e.Mode),
		Permissions:        e.Perm,
		Owner:              e.Owner,
		Group:              e.Group,
		ModifiedTimeUnixMs: e.ModTime.UnixMilli(),
		Metadata:           e.Metadata,
	}
	if e.Type == safefs.TypeSymlink || e.SymlinkTarget != "" {
		t := e.SymlinkTarget
		info.SymlinkTarget = &t
	}
	return info
}

func entryInfos(es []safefs.Entry) []*raydv1.EntryInfo {
	out := make([]*raydv1.EntryInfo, len(es))
	for i, e := range es {
		out[i] = entryInfo(e)
	}
	return out
}

func fileType(t safefs.FileType) raydv1.FileType {
	switch t {
	case safefs.TypeFile:
		return raydv1.FileType_FILE_TYPE_FILE
	case safefs.TypeDir:
		return raydv1.FileType_FILE_TYPE_DIRECTORY
	case safefs.TypeSymlink:
		return raydv1.FileType_FILE_TYPE_SYMLINK
	}
	return raydv1.FileType_FILE_TYPE_UNSPECIFIED
}

// stMode turns Go's fs.FileMode back into the full st_mode bits.
func stMode(m fs.FileMode) uint32 {
	out := uint32(m.Perm())
	switch {
	case m&fs.ModeDir != 0:
		out |= unix.S_IFDIR
	case m&fs.ModeSymlink != 0:
		out |= unix.S_IFLNK
	case m&fs.ModeNamedPipe != 0:
		out |= unix.S_IFIFO
	case m&fs.ModeSocket != 0:
		out |= unix.S_IFSOCK
	case m&fs.ModeCharDevice != 0:
		out |= unix.S_IFCHR
	case m&fs.ModeDevice != 0:
		out |= unix.S_IFBLK
	default:
		out |= unix.S_IFREG
	}
	if m&fs.ModeSetuid != 0 {
		out |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		out |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		out |= unix.S_ISVTX
	}
	return out
}

// notBuilt answers the RPCs whose feature has not landed yet.
func notBuilt(feature string) error {
	return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, feature+" is not built yet in this rayd; see docs/features.md")
}
