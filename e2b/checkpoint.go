package e2b

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/rayito-dev/rayito/proto/checkpoint"
)

// A snapshot's archive is Rayito's open checkpoint format (package
// proto/checkpoint, docs/persistence.md), the one rayd's HOME checkpoints
// use: the gateway re-packs the tar that GNU tar makes of HomeDir in the
// sandbox into the format's layout (names relative to HomeDir, directories
// before their contents, permission bits only, whole seconds, devices,
// FIFOs and hard links left out), gzip level 1, and hashes it while it is
// written. A restore reads the manifest, checks the archive's size and
// sha256 and every entry (CheckHeader, no path through a link of the
// archive) before the sandbox is even created, then streams the checked
// entries, re-packed as a plain tar, into tar -x in the new sandbox.

// snapshotProducer names the gateway in the manifests it writes.
const snapshotProducer = "rayito-e2b"

// packCounts are what a re-packed archive holds, for its manifest.
type packCounts struct {
	files, dirs, symlinks, content uint64
	// skipped: devices, FIFOs, hard links and other kinds the sandbox's
	// tar sent, which the format does not hold.
	skipped uint64
	// entries: all the sandbox's tar sent, HomeDir itself included.
	entries uint64
}

// unusableArchive is the error of a sandbox's tar output the format
// refuses (a path leaving HomeDir, a broken archive): err names no path.
func unusableArchive(err error) error {
	return &httpError{http.StatusInternalServerError, "the archive of " + HomeDir + " made in the sandbox is not usable: " + reason(err)}
}

// reason is a checkpoint error's message without its package prefix.
func reason(err error) string {
	msg := err.Error()
	for _, base := range []error{checkpoint.ErrUnsafe, checkpoint.ErrChecksum, checkpoint.ErrUnsupported} {
		if errors.Is(err, base) {
			p := base.Error()
			if len(msg) > len(p)+2 && msg[:len(p)] == p {
				return msg[len(p)+2:]
			}
			return p[len("checkpoint: "):]
		}
	}
	return msg
}

// repackHome runs tarHome (the sandbox's tar of HomeDir, at most maxRaw
// bytes) and writes its entries to out in the checkpoint format. An entry
// the format refuses fails the whole archive; what it does not hold is
// left out and counted.
func repackHome(tarHome func(io.Writer) error, out io.Writer, maxRaw int64) (packCounts, error) {
	var c packCounts
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := tarHome(&limitWriter{w: pw, max: maxRaw})
		pw.CloseWithError(err)
		done <- err
	}()
	zw, err := gzip.NewWriterLevel(out, checkpoint.GzipLevel)
	if err != nil {
		pr.Close()
		<-done
		return c, err
	}
	tw := tar.NewWriter(zw)
	var (
		owner    checkpoint.Owner
		ownerSet bool
		writeErr error // out's own failure (a cap), never the input's
	)
	walkErr := checkpoint.WalkTar(pr, func(e checkpoint.Entry, body io.Reader) error {
		c.entries++
		if !ownerSet {
			// GNU tar sends HomeDir itself ("./") first: its owner is
			// the user's, the owner of every entry.
			owner, ownerSet = e.Owner, true
		}
		var err error
		switch e.Kind {
		case checkpoint.KindDir:
			err = tw.WriteHeader(checkpoint.DirHeader(e.Path, e.Perm, e.ModTime, owner))
			c.dirs++
		case checkpoint.KindSymlink:
			err = tw.WriteHeader(checkpoint.SymlinkHeader(e.Path, e.Target, e.Perm, e.ModTime, owner))
			c.symlinks++
		case checkpoint.KindFile:
			if err = tw.WriteHeader(checkpoint.FileHeader(e.Path, e.Perm, e.ModTime, e.Size, owner)); err == nil {
				_, err = io.Copy(tw, body)
			}
			c.files++
			c.content += uint64(e.Size)
		default:
			if e.Skip != checkpoint.SkipRoot {
				c.skipped++
			}
		}
		if err != nil {
			writeErr = err
		}
		return err
	})
	if walkErr == nil {
		// GNU tar pads its archive after the end marker.
		_, walkErr = io.Copy(io.Discard, pr)
	}
	if walkErr != nil {
		pr.CloseWithError(walkErr)
	}
	terr := <-done
	switch {
	case writeErr != nil:
		return c, writeErr
	case terr != nil && walkErr != nil && errors.Is(terr, walkErr):
		// The walk refused the archive and stopped the sandbox's tar.
		return c, unusableArchive(walkErr)
	case terr != nil:
		// The sandbox's tar failed (or passed maxRaw): its reason first.
		return c, terr
	case walkErr != nil:
		if errors.Is(walkErr, checkpoint.ErrUnsafe) {
			return c, unusableArchive(walkErr)
		}
		return c, walkErr
	}
	if c.entries == 0 {
		// GNU tar always sends HomeDir itself: a tar that ended well
		// without an archive is not one (an archive of nothing would be
		// a snapshot that silently restores nothing).
		return c, &httpError{http.StatusInternalServerError, "tar in the source sandbox sent no archive of " + HomeDir + ": snapshots need GNU tar in the sandbox's image"}
	}
	if err := tw.Close(); err != nil {
		return c, err
	}
	return c, zw.Close()
}

// snapArchive is a snapshot's archive, checked against its manifest and
// scanned, open for its restore.
type snapArchive struct {
	id   string
	f    *os.File
	man  *checkpoint.Manifest
	plan checkpoint.Plan
}

func (a *snapArchive) Close() error { return a.f.Close() }

// unusable is the error of a snapshot the gateway cannot restore; it
// names the snapshot, never a path.
func unusable(id, why string) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf("snapshot %q cannot be restored: %s", id, why)}
}

// verify opens snapshot id's archive and checks it whole before anything
// is streamed anywhere: its size and sha256 against the manifest, then
// every entry as an extraction would (checkpoint.Scan), its files holding
// at most maxContent bytes.
func (st *snapshotStore) verify(id string, maxContent int64) (*snapArchive, error) {
	man, err := st.manifest(id)
	if err != nil {
		return nil, err
	}
	f, err := openNoFollow(st.file(id, checkpoint.ArchiveName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, unusable(id, "its manifest names an archive ("+checkpoint.ArchiveName+") that is missing")
	}
	if err != nil {
		return nil, err
	}
	a := &snapArchive{id: id, f: f, man: man}
	if err := a.check(maxContent); err != nil {
		f.Close()
		return nil, err
	}
	return a, nil
}

func (a *snapArchive) check(maxContent int64) error {
	fi, err := a.f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return unusable(a.id, checkpoint.ArchiveName+" is not a regular file")
	}
	if fi.Size() != a.man.Size {
		return unusable(a.id, "its archive's size is not its manifest's (checksum mismatch)")
	}
	h := sha256.New()
	tee := io.TeeReader(a.f, h)
	plan, scanErr := checkpoint.Scan(bufio.NewReaderSize(tee, 256<<10), uint64(maxContent))
	// The rest (the gzip trailer, or what Scan did not need) counts too.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != a.man.SHA256 {
		return unusable(a.id, "its archive does not match the sha256 of its manifest (checksum mismatch)")
	}
	switch {
	case errors.Is(scanErr, checkpoint.ErrTooBig):
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("snapshot %q holds files larger than the %s a fork or snapshot copies", a.id, sizeStr(maxContent))}
	case scanErr != nil:
		return unusable(a.id, "its archive is unsafe or malformed: "+reason(scanErr))
	}
	a.plan = plan
	_, err = a.f.Seek(0, io.SeekStart)
	return err
}

// restoreSnapshot extracts the checked archive a into the new sandbox
// sbx: every entry checked again as it is read, re-packed as a plain tar
// of directories, regular files and symbolic links (permission bits
// only) into tar -x as the sandbox's user. The archive is hashed again
// as it is read: one changed since it was checked fails the restore
// before tar sees the archive's end (and the caller kills the sandbox).
func (s *Server) restoreSnapshot(ctx context.Context, sbx sandbox, a *snapArchive) error {
	cctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h := sha256.New()
		tee := io.TeeReader(a.f, h)
		tw := tar.NewWriter(pw)
		err := checkpoint.Walk(bufio.NewReaderSize(tee, 256<<10), func(e checkpoint.Entry, body io.Reader) error {
			var o checkpoint.Owner
			switch e.Kind {
			case checkpoint.KindDir:
				return tw.WriteHeader(checkpoint.DirHeader(e.Path, e.Perm, e.ModTime, o))
			case checkpoint.KindSymlink:
				return tw.WriteHeader(checkpoint.SymlinkHeader(e.Path, e.Target, e.Perm, e.ModTime, o))
			case checkpoint.KindFile:
				if err := tw.WriteHeader(checkpoint.FileHeader(e.Path, e.Perm, e.ModTime, e.Size, o)); err != nil {
					return err
				}
				_, err := io.Copy(tw, body)
				return err
			}
			return nil
		})
		if err == nil {
			_, err = io.Copy(io.Discard, tee)
		}
		if err == nil && hex.EncodeToString(h.Sum(nil)) != a.man.SHA256 {
			err = unusable(a.id, "its archive changed while it was restored (checksum mismatch)")
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err := copyInto(cctx, sbx, pr)
	pr.CloseWithError(errors.New("restore ended"))
	<-done
	return err
}
