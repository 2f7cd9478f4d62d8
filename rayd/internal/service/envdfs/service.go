// Package envdfs serves E2B envd's filesystem.Filesystem service (the E2B
// shim's envd port) by calling rayd's own FilesystemService (package
// files), and so the safe file layer with its path rules, identity
// switching and deny lists, only in E2B's shapes. One file per RPC. The
// user comes from `Authorization: Basic base64("<user>:")` (default: the
// sandbox's default user); paths are resolved as envd resolves them
// (package envdpath: "", "~", relative to the user's home, ".." cleaned).
// The file service it is given is the one over the E2B file layer
// (safefs.Options.Envd): envd's metadata namespace, link descriptions and
// parent directories.
package envdfs

import (
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem/filesystemconnect"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/envdpath"
	"github.com/rayito-dev/rayito/rayd/internal/envduser"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
	"github.com/rayito-dev/rayito/rayd/internal/service/files"
)

// Service implements filesystemconnect.FilesystemHandler.
type Service struct {
	state *sandbox.State
	files *files.Service
}

var _ filesystemconnect.FilesystemHandler = (*Service)(nil)

// New returns the service over rayd's file service (the one over the E2B
// file layer) and the sandbox's state (its default working directory).
func New(state *sandbox.State, f *files.Service) *Service { return &Service{state: state, files: f} }

// path resolves a path of the request for the user u as envd does
// (envdpath.Resolve): "" is the default working directory, "~" the
// user's home.
func (s *Service) path(u *raydv1.User, p string) (string, error) {
	su, err := s.files.User(u.GetUsername())
	if err != nil {
		return "", err
	}
	return Resolve(s.state, su, p)
}

// Resolve resolves p for the user su as envd does (also for the plain
// HTTP endpoints of package envdhttp).
func Resolve(state *sandbox.State, su safefs.User, p string) (string, error) {
	wd := ""
	if b := state.Boot(); b != nil && b.WorkdirSet {
		wd = b.Workdir
	}
	r, err := envdpath.Resolve(p, su.Home, wd)
	if err != nil {
		return "", rpcerr.Invalid("cannot expand another user's home directory (~name)")
	}
	return r, nil
}

// user returns the request's user for rayd's file service.
func user(h http.Header) (*raydv1.User, error) {
	u, err := envduser.FromHeader(h)
	if err != nil {
		return nil, rpcerr.Invalid("invalid Authorization header: expected Basic credentials naming a user")
	}
	if u == "" {
		return nil, nil
	}
	return &raydv1.User{Username: u}, nil
}

// entry renders one of rayd's entries in E2B's shape.
func entry(e *raydv1.EntryInfo) *filesystem.EntryInfo {
	if e == nil {
		return nil
	}
	return &filesystem.EntryInfo{
		Name:          e.GetName(),
		Type:          fileType(e.GetType()),
		Path:          e.GetPath(),
		Size:          e.GetSize(),
		Mode:          e.GetMode() & 0o777, // envd: the permission bits only
		Permissions:   e.GetPermissions(),
		Owner:         e.GetOwner(),
		Group:         e.GetGroup(),
		ModifiedTime:  timestamppb.New(time.UnixMilli(e.GetModifiedTimeUnixMs())),
		SymlinkTarget: e.SymlinkTarget,
		Metadata:      e.GetMetadata(),
	}
}

func fileType(t raydv1.FileType) filesystem.FileType {
	switch t {
	case raydv1.FileType_FILE_TYPE_FILE:
		return filesystem.FileType_FILE_TYPE_FILE
	case raydv1.FileType_FILE_TYPE_DIRECTORY:
		return filesystem.FileType_FILE_TYPE_DIRECTORY
	case raydv1.FileType_FILE_TYPE_SYMLINK:
		return filesystem.FileType_FILE_TYPE_SYMLINK
	}
	return filesystem.FileType_FILE_TYPE_UNSPECIFIED
}
