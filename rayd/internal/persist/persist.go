// Package persist checkpoints HOME to S3 and restores it, in the open
// format of package archive: s3://bucket/prefix/name/home.tar.gz, uploaded
// in 8 MiB parts, then manifest.json naming its sha256, written last.
//
// rayd does it as root with the execution role's credentials (S3Config),
// never the sandbox's code, and touches HOME only as the user, through
// safefs. A sandbox created with persistence is bound to its bucket and
// prefix (Binding): anything outside is refused before any S3 call. One
// checkpoint or restore runs at a time. A checkpoint cancelled, or cut by a
// /suspend, before its archive is complete aborts the multipart upload and
// writes no manifest; once the archive is complete the manifest is always
// written. A restore downloads the archive into an unnamed file on HOME's
// file system, checks its size and sha256 against the manifest, then
// checks every entry (archive.Scan) and the room it needs, and only then
// extracts it.
package persist

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/persist/archive"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

// Errors of a checkpoint or a restore (besides the store's, safefs' and
// archive's).
var (
	// ErrBusy: another checkpoint or restore of the sandbox is running.
	ErrBusy = errors.New("persist: a checkpoint or restore is already running")
	// ErrOutsideBinding: the location lies outside the bucket and prefix
	// the sandbox is bound to.
	ErrOutsideBinding = errors.New("persist: the location is outside the bucket and prefix this sandbox is bound to")
	// ErrNotBound: no location was given and the sandbox is bound to none.
	ErrNotBound = errors.New("persist: no location given, and the sandbox was created without persistence")
	// ErrNoCheckpoint: the location holds no manifest.
	ErrNoCheckpoint = errors.New("persist: no checkpoint at this location")
)

// Options configure a Manager.
type Options struct {
	FS     *safefs.FS
	Stores Stores
	Logger *slog.Logger
	// Producer names rayd in manifests ("rayd/0.1.0").
	Producer string
	// PartSize overrides archive.PartSize (tests); S3 wants 5 MiB at least
	// for every part but the last.
	PartSize int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Manager runs a sandbox's checkpoints and restores, one at a time.
type Manager struct {
	o        Options
	busy     atomic.Bool
	mu       sync.Mutex
	lastName string
}

// New returns a Manager.
func New(o Options) *Manager {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PartSize <= 0 {
		o.PartSize = archive.PartSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Manager{o: o}
}

// Request is one checkpoint or restore.
type Request struct {
	// Location is the place; nil is the binding's (ErrNotBound without
	// one). Its Name may be empty: see Name.
	Bucket, Prefix, Region string
	HasLocation            bool
	// Name is the checkpoint's name; "" is the name last used by this
	// sandbox, else DefaultName.
	Name string
	// Excludes are the user's patterns (checkpoint only).
	Excludes []string
	// Binding is the sandbox's binding (nil: none).
	Binding *Binding
	// User and Home: HOME is read or written as User.
	User safefs.User
	Home string
	// Started, when set, is called once the request was accepted (and, for
	// a restore, the manifest read), before the data moves: bytesTotal is
	// the archive's size for a restore, 0 for a checkpoint.
	Started func(name string, bytesTotal int64)
	// Progress, when set, is called as data moves (at most every 200 ms,
	// and at the end).
	Progress func(p Progress)
}

// Progress is how far a checkpoint or restore is.
type Progress struct {
	// BytesDone is the archive's bytes uploaded or downloaded.
	BytesDone  int64
	BytesTotal int64 // restore only
	Files      uint64
}

// Result is a finished checkpoint or restore.
type Result struct {
	Name     string
	SHA256   string
	Bytes    int64 // the archive's size
	Counts   archive.Counts
	Duration time.Duration
}

// location resolves the request's location and checks the binding.
func (m *Manager) location(r Request) (Location, error) {
	name := r.Name
	if name == "" {
		m.mu.Lock()
		name = m.lastName
		m.mu.Unlock()
		if name == "" {
			name = DefaultName
		}
	}
	var (
		l   Location
		err error
	)
	if r.HasLocation {
		l, err = NewLocation(r.Bucket, r.Prefix, r.Region, name)
	} else {
		if r.Binding == nil {
			return Location{}, ErrNotBound
		}
		l, err = NewLocation(r.Binding.Bucket, r.Binding.Prefix, r.Region, name)
	}
	if err != nil {
		return Location{}, err
	}
	if !r.Binding.Allows(l) {
		return Location{}, ErrOutsideBinding
	}
	return l, nil
}

// begin takes the one slot, or fails with ErrBusy.
func (m *Manager) begin() (func(), error) {
	if !m.busy.CompareAndSwap(false, true) {
		return nil, ErrBusy
	}
	return func() { m.busy.Store(false) }, nil
}

func (m *Manager) remember(name string) {
	m.mu.Lock()
	m.lastName = name
	m.mu.Unlock()
}

// progress rate-limits a request's Progress callback.
type progress struct {
	fn   func(Progress)
	last time.Time
	mu   sync.Mutex
	cur  Progress
}

func (p *progress) update(f func(*Progress), force bool) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	f(&p.cur)
	cur := p.cur
	send := force || time.Since(p.last) >= 200*time.Millisecond
	if send {
		p.last = time.Now()
	}
	p.mu.Unlock()
	if send {
		p.fn(cur)
	}
}

// Checkpoint archives HOME to the request's location.
func (m *Manager) Checkpoint(ctx context.Context, r Request) (Result, error) {
	start := m.o.Now()
	excludes, err := archive.ParseExcludes(r.Excludes)
	if err != nil {
		return Result{}, err
	}
	l, err := m.location(r)
	if err != nil {
		return Result{}, err
	}
	done, err := m.begin()
	if err != nil {
		return Result{}, err
	}
	defer done()
	store, err := m.o.Stores.Store(ctx, l.Region)
	if err != nil {
		return Result{}, err
	}
	m.remember(l.Name)
	if r.Started != nil {
		r.Started(l.Name, 0)
	}
	prog := &progress{fn: r.Progress}

	// The archive is made in one goroutine and uploaded from the pipe in
	// parts by another; a failure on either side stops both.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pr, pw := io.Pipe()
	hasher := sha256.New()
	var counts archive.Counts
	packErr := make(chan error, 1)
	go func() {
		c, err := archive.Pack(ctx, m.o.FS, r.User, r.Home, excludes, io.MultiWriter(pw, hasher), func(c archive.Counts) {
			prog.update(func(p *Progress) { p.Files = c.Files }, false)
		})
		counts = c
		pw.CloseWithError(errOr(err, io.EOF))
		packErr <- err
	}()
	key := l.Key(archive.ArchiveName)
	size, err := m.upload(ctx, store, l.Bucket, key, pr, prog)
	if err != nil {
		cancel(err)
		pr.CloseWithError(err)
		if perr := <-packErr; perr != nil && !errors.Is(perr, io.ErrClosedPipe) && !isCanceled(perr) {
			err = perr // the cause: reading HOME failed
		}
		m.o.Logger.Warn("checkpoint failed", "err_class", classOf(err))
		return Result{}, err
	}
	if err := <-packErr; err != nil {
		// The pipe ended early but the upload took it as complete:
		// cannot happen (Pack's error closes the pipe with it), kept as
		// a guard.
		return Result{}, err
	}
	sum := hex.EncodeToString(hasher.Sum(nil))
	man := &archive.Manifest{
		Version: archive.Version, Format: archive.Format, Archive: archive.ArchiveName,
		SHA256: sum, Size: size, CreatedAt: start.UTC().Truncate(time.Second),
		Files: counts.Files, Directories: counts.Directories, Symlinks: counts.Symlinks, ContentBytes: counts.ContentBytes,
		Producer: m.o.Producer,
	}
	// The archive is in place: its manifest is written whatever happens
	// to the call now, or the previous manifest would name another
	// archive.
	mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	err = store.Put(mctx, l.Bucket, l.Key(archive.ManifestName), man.Encode(), "application/json")
	mcancel()
	if err != nil {
		m.o.Logger.Warn("checkpoint manifest not written", "err_class", classOf(err))
		return Result{}, err
	}
	prog.update(func(p *Progress) { p.Files = counts.Files }, true)
	res := Result{Name: l.Name, SHA256: sum, Bytes: size, Counts: counts, Duration: m.o.Now().Sub(start)}
	m.o.Logger.Info("checkpoint written", "bytes", size, "files", counts.Files, "content_bytes", counts.ContentBytes, "skipped", counts.Special+counts.Unreadable+counts.OtherDevice, "duration_ms", res.Duration.Milliseconds())
	return res, nil
}

func errOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// maxParts is S3's limit of parts in an upload.
const maxParts = 10000

// upload writes what r yields to bucket/key: one Put when it fits in one
// part, else a multipart upload of PartSize parts, two in flight, which is
// aborted on any failure or cancellation (no part is left behind). It
// returns the object's size.
func (m *Manager) upload(ctx context.Context, store Store, bucket, key string, r io.Reader, prog *progress) (int64, error) {
	const ctype = "application/gzip"
	first := make([]byte, m.o.PartSize)
	n, err := io.ReadFull(r, first)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if err := store.Put(ctx, bucket, key, first[:n], ctype); err != nil {
			return 0, err
		}
		prog.update(func(p *Progress) { p.BytesDone = int64(n) }, true)
		return int64(n), nil
	case err != nil:
		return 0, err
	}
	uploadID, err := store.CreateMultipart(ctx, bucket, key, ctype)
	if err != nil {
		return 0, err
	}
	size, err := m.parts(ctx, store, bucket, key, uploadID, first, r, prog)
	if err != nil {
		// Aborted on a context of its own: the call's may be gone (a
		// cancel, a /suspend), the parts must not stay.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		if aerr := store.AbortMultipart(actx, bucket, key, uploadID); aerr != nil {
			m.o.Logger.Warn("multipart upload not aborted (the bucket's AbortIncompleteMultipartUpload rule removes it)", "err_class", classOf(aerr))
		}
		cancel()
		return 0, err
	}
	return size, nil
}

// parts uploads first and the rest of r as the parts of uploadID, then
// completes it.
func (m *Manager) parts(ctx context.Context, store Store, bucket, key, uploadID string, first []byte, r io.Reader, prog *progress) (int64, error) {
	caller := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	const inFlight = 2
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		parts []Part
		size  int64
		sem   = make(chan []byte, inFlight+1) // free buffers
	)
	for range inFlight {
		sem <- make([]byte, m.o.PartSize)
	}
	send := func(n int32, buf []byte, length int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := store.UploadPart(ctx, bucket, key, uploadID, n, buf[:length])
			if err != nil {
				cancel(err)
			} else {
				mu.Lock()
				parts = append(parts, p)
				mu.Unlock()
				prog.update(func(pp *Progress) { pp.BytesDone += int64(length) }, false)
			}
			sem <- buf
		}()
	}
	size += int64(len(first))
	send(1, first, len(first))
	var readErr error
	for n := int32(2); ; n++ {
		var buf []byte
		select {
		case buf = <-sem:
		case <-ctx.Done():
		}
		if buf == nil {
			break
		}
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			if n > maxParts {
				readErr = fmt.Errorf("%w: the archive needs more than %d parts", archive.ErrUnsafe, maxParts)
				break
			}
			size += int64(k)
			send(n, buf, k)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
	}
	wg.Wait()
	if readErr != nil {
		return 0, readErr
	}
	// The caller's end reads as its ctx.Err(), whatever its cause, as on
	// every other path of a checkpoint; a part's failure as that failure.
	if err := caller.Err(); err != nil {
		return 0, err
	}
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	slicesSortParts(parts)
	if err := store.CompleteMultipart(ctx, bucket, key, uploadID, parts); err != nil {
		return 0, err
	}
	prog.update(func(pp *Progress) {}, true)
	return size, nil
}

func slicesSortParts(ps []Part) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].Number < ps[j-1].Number; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// Restore extracts the checkpoint at the request's location into HOME.
func (m *Manager) Restore(ctx context.Context, r Request) (Result, error) {
	start := m.o.Now()
	l, err := m.location(r)
	if err != nil {
		return Result{}, err
	}
	done, err := m.begin()
	if err != nil {
		return Result{}, err
	}
	defer done()
	store, err := m.o.Stores.Store(ctx, l.Region)
	if err != nil {
		return Result{}, err
	}
	m.remember(l.Name)
	man, err := m.manifest(ctx, store, l)
	if err != nil {
		return Result{}, err
	}
	if r.Started != nil {
		r.Started(l.Name, man.Size)
	}
	prog := &progress{fn: r.Progress, cur: Progress{BytesTotal: man.Size}}

	// Spool: the archive lands in an unnamed file on HOME's file system,
	// where nothing else can open it, and is checked before use.
	spool, err := m.o.FS.SpoolFile(ctx, r.User, r.Home)
	if err != nil {
		return Result{}, err
	}
	defer spool.Close()
	if err := m.o.FS.CheckReserve(spool, man.Size); err != nil {
		return Result{}, err
	}
	if err := m.download(ctx, store, l, man, spool, prog); err != nil {
		m.o.Logger.Warn("restore failed", "err_class", classOf(err))
		return Result{}, err
	}
	// Every entry is checked, and the room its files need, before the
	// first one is written.
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return Result{}, err
	}
	plan, err := archive.Scan(spool, 0)
	if err != nil {
		m.o.Logger.Warn("restore refused an archive", "err_class", classOf(err))
		return Result{}, err
	}
	if err := m.o.FS.CheckReserve(spool, int64(min(plan.ContentBytes, 1<<62))); err != nil {
		return Result{}, err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return Result{}, err
	}
	x, err := m.o.FS.NewExtractor(ctx, r.User, r.Home)
	if err != nil {
		return Result{}, err
	}
	counts, err := archive.Extract(ctx, x, spool, func(c archive.Counts) {
		prog.update(func(p *Progress) { p.Files = c.Files }, false)
	})
	if err != nil {
		m.o.Logger.Warn("restore failed while extracting", "err_class", classOf(err), "files", counts.Files)
		return Result{}, err
	}
	prog.update(func(p *Progress) { p.Files = counts.Files }, true)
	res := Result{Name: l.Name, SHA256: man.SHA256, Bytes: man.Size, Counts: counts, Duration: m.o.Now().Sub(start)}
	m.o.Logger.Info("checkpoint restored", "bytes", man.Size, "files", counts.Files, "content_bytes", counts.ContentBytes,
		"skipped", counts.Special+counts.HardLinks+counts.Other+counts.Conflicts, "modes_sanitized", counts.ModesSanitized, "duration_ms", res.Duration.Milliseconds())
	return res, nil
}

// manifest reads and checks the location's manifest.
func (m *Manager) manifest(ctx context.Context, store Store, l Location) (*archive.Manifest, error) {
	body, _, err := store.Get(ctx, l.Bucket, l.Key(archive.ManifestName))
	if err != nil {
		if errors.Is(err, ErrObjectNotFound) {
			return nil, ErrNoCheckpoint
		}
		return nil, err
	}
	defer body.Close()
	man, err := archive.ParseManifest(body)
	if err != nil {
		if errors.Is(err, archive.ErrUnsupported) || ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w (%s)", ErrStorageUnavailable, "manifest read")
	}
	return man, nil
}

// download copies the archive into spool, hashing it, and checks its
// size and sha256 against the manifest: more bytes than the manifest
// says, fewer, or others, is archive.ErrChecksum.
func (m *Manager) download(ctx context.Context, store Store, l Location, man *archive.Manifest, spool io.Writer, prog *progress) error {
	body, size, err := store.Get(ctx, l.Bucket, l.Key(archive.ArchiveName))
	if err != nil {
		if errors.Is(err, ErrObjectNotFound) {
			return fmt.Errorf("%w: the manifest names an archive that is missing", archive.ErrChecksum)
		}
		return err
	}
	defer body.Close()
	if size >= 0 && size != man.Size {
		return fmt.Errorf("%w: the archive's size is not the manifest's", archive.ErrChecksum)
	}
	h := sha256.New()
	n, err := copyCtx(ctx, io.MultiWriter(spool, h), io.LimitReader(body, man.Size+1), func(n int64) {
		prog.update(func(p *Progress) { p.BytesDone += n }, false)
	})
	if err != nil {
		return err
	}
	if n != man.Size || !sumIs(h, man.SHA256) {
		return fmt.Errorf("%w: the archive does not match its manifest", archive.ErrChecksum)
	}
	prog.update(func(p *Progress) {}, true)
	return nil
}

func sumIs(h hash.Hash, want string) bool { return hex.EncodeToString(h.Sum(nil)) == want }

// copyCtx copies src to dst, checking ctx between chunks; a failed read of
// src is the store's (unavailable), a failed write the spool's.
func copyCtx(ctx context.Context, dst io.Writer, src io.Reader, moved func(int64)) (int64, error) {
	buf := make([]byte, 256<<10)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return total, spoolErr(err)
			}
			total += int64(n)
			moved(int64(n))
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return total, ctx.Err()
			}
			return total, fmt.Errorf("%w (%s)", ErrStorageUnavailable, "archive read")
		}
	}
}

// spoolErr maps a failed write to the spool file (ENOSPC) to safefs' disk
// error.
func spoolErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w", safefs.ErrDiskFull)
	}
	return err
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// classOf names an error's class for rayd's log, never its text.
func classOf(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{context.Canceled, "canceled"}, {context.DeadlineExceeded, "deadline"},
		{ErrNoCredentials, "no_credentials"}, {ErrStorageDenied, "storage_denied"}, {ErrWrongRegion, "wrong_region"},
		{ErrObjectNotFound, "not_found"}, {ErrStorageUnavailable, "storage_unavailable"},
		{archive.ErrChecksum, "checksum_mismatch"}, {archive.ErrUnsafe, "unsafe_archive"}, {archive.ErrUnsupported, "unsupported_format"},
		{safefs.ErrDiskReserve, "disk_reserve"}, {safefs.ErrDiskFull, "disk_full"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	var pe *safefs.PathError
	if errors.As(err, &pe) {
		return "fs_" + pe.Reason
	}
	return "other"
}
