package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

const (
	stateFileVersion = 1
	tmpPrefix        = ".tmp-"
	maxStateFile     = 1 << 20
)

// stateFile is the JSON of <StateDir>/vms/<id>.json.
type stateFile struct {
	Version int                 `json:"version"`
	Seq     uint64              `json:"seq"`
	Microvm microvmsapi.Microvm `json:"microvm"`
	// ClientToken and Fingerprint keep RunMicrovm idempotent across a
	// restart; the run hook payload itself is never stored.
	ClientToken string           `json:"clientToken,omitempty"`
	Fingerprint string           `json:"fingerprint"`
	Record      *launcher.Record `json:"record,omitempty"`
	// SuspendedAt is when a SUSPENDED microVM was suspended (its idle
	// policy's suspendedDurationSeconds count from it).
	SuspendedAt *time.Time `json:"suspendedAt,omitempty"`
	// Layer is the template layer the microVM runs (its directory).
	Layer string `json:"layer,omitempty"`
}

func (r *Registry) statePath(id string) string { return filepath.Join(r.vmsDir, id+".json") }

// validID reports whether s is "microvm-" and a canonical lowercase UUID,
// so that it is safe as a file name.
func validID(s string) bool {
	rest, ok := strings.CutPrefix(s, "microvm-")
	if !ok || len(rest) != 36 {
		return false
	}
	u, err := uuid.Parse(rest)
	return err == nil && u.String() == rest
}

// EnsureStateDir creates dir (mode 0700, parents included) if needed and
// checks that it is a directory owned by this user, restricting an
// existing one to 0700.
func EnsureStateDir(dir string) error { return ensureDir(dir) }

func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by this user", dir, st.Uid)
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// writeFileAtomic replaces path with data (0600): a temporary file in the
// same directory, renamed over path. Nothing is fsynced: the rename keeps a
// crash of the platform from leaving a torn file, and a crash of the
// machine ends every sandbox anyway (Open then finds their processes gone,
// and treats an unreadable state file like any corrupt one). Three fsynced
// writes cost about 4 ms of each create here.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tmpPrefix+"*") // mode 0600
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	// Over an existing file, exchange the two and unlink the old one: a
	// rename over it makes ext4 write the new data out at once
	// (auto_da_alloc), which cost about 0.5 ms per write here.
	if err = unix.Renameat2(unix.AT_FDCWD, f.Name(), unix.AT_FDCWD, path, unix.RENAME_EXCHANGE); err == nil {
		_ = os.Remove(f.Name())
		return nil
	}
	return os.Rename(f.Name(), path)
}

// fileLocked is v's state file now.
func fileLocked(v *vm) stateFile {
	sf := stateFile{
		Version:     stateFileVersion,
		Seq:         v.seq,
		Microvm:     clone(v.pub),
		ClientToken: v.clientToken,
		Fingerprint: v.fingerprint,
		Layer:       v.layer,
	}
	if v.rec != nil {
		rec := *v.rec
		sf.Record = &rec
	}
	if v.suspendedAt != nil {
		t := *v.suspendedAt
		sf.SuspendedAt = &t
	}
	return sf
}

// createFiles makes v's directory and writes its first state file.
func (r *Registry) createFiles(v *vm) error {
	if err := ensureDir(v.dir); err != nil {
		return err
	}
	return r.persistErr(v)
}

// persist writes v's state file if it changed since the last write. A
// failure is logged: the registry's memory stays the truth until the next
// write.
func (r *Registry) persist(v *vm) {
	if err := r.persistErr(v); err != nil {
		r.log.Error("registry: cannot write a state file", "microvm", v.id, "err", err)
	}
}

func (r *Registry) persistErr(v *vm) error {
	r.mu.Lock()
	sf, gen := fileLocked(v), v.gen
	r.mu.Unlock()
	v.fileMu.Lock()
	defer v.fileMu.Unlock()
	if v.removed || gen <= v.written {
		return nil
	}
	data, err := json.MarshalIndent(sf, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(r.statePath(v.id), append(data, '\n')); err != nil {
		return err
	}
	v.written = gen
	return nil
}

// removeFiles deletes the state files and directories of vms, and keeps
// them from being written again.
func (r *Registry) removeFiles(vms []*vm) {
	for _, v := range vms {
		v.fileMu.Lock()
		v.removed = true
		if err := os.Remove(r.statePath(v.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("registry: cannot remove a state file", "microvm", v.id, "err", err)
		}
		if err := os.RemoveAll(v.dir); err != nil {
			r.log.Warn("registry: cannot remove a sandbox directory", "microvm", v.id, "err", err)
		}
		v.fileMu.Unlock()
	}
}

// load reads one state file.
func (r *Registry) load(id string) (*vm, error) {
	f, err := os.Open(r.statePath(id))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxStateFile {
		return nil, errors.New("state file too large")
	}
	var sf stateFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return nil, err
	}
	if sf.Version != stateFileVersion || sf.Microvm.MicrovmID != id || !sf.Microvm.State.Valid() {
		return nil, errors.New("state file does not describe this microVM")
	}
	if sf.Record != nil && sf.Record.ID != id {
		return nil, errors.New("state file holds another sandbox's record")
	}
	v := &vm{
		id:          id,
		endpoint:    strings.TrimPrefix(id, "microvm-") + EndpointSuffix,
		seq:         sf.Seq,
		dir:         filepath.Join(r.vmsDir, id),
		clientToken: sf.ClientToken,
		fingerprint: sf.Fingerprint,
		layer:       sf.Layer,
		pub:         sf.Microvm,
		rec:         sf.Record,
		suspendedAt: sf.SuspendedAt,
		booted:      make(chan struct{}),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		kick:        make(chan struct{}, 1),
		changed:     make(chan struct{}),
	}
	v.pub.Endpoint = v.endpoint
	v.pub.StateReason = legacyReason(v.pub.StateReason)
	v.gen, v.written = 1, 1
	return v, nil
}

// recover loads the state files, re-adopts or cleans up each sandbox,
// sweeps the launcher's leftovers and starts watching the adopted ones.
func (r *Registry) recover(ctx context.Context) error {
	entries, err := os.ReadDir(r.vmsDir)
	if err != nil {
		return fmt.Errorf("registry: read state dir: %w", err)
	}
	loaded, known := r.loadAll(entries)

	type adoption struct {
		v    *vm
		inst launcher.Instance
	}
	var adopted []adoption
	var kept []launcher.Record
	t := now()
	for _, v := range loaded {
		switch {
		case v.pub.State == microvmsapi.StateTerminated:
			close(v.stop)
			close(v.done)
			if r.expiredLocked(v, t) || v.pub.TerminatedAt == nil {
				r.removeFiles([]*vm{v})
				continue
			}
			r.insertLocked(v)
		case (v.pub.State == microvmsapi.StateRunning || v.pub.State == microvmsapi.StateSuspending ||
			v.pub.State == microvmsapi.StateSuspended) && v.rec != nil:
			inst, err := r.launcher.Adopt(*v.rec)
			if err == nil {
				v.inst = inst
				if v.pub.State != microvmsapi.StateRunning {
					// A SUSPENDED one stays so (frozen again if a resume
					// was cut short); a SUSPENDING one is suspended again.
					v.want, v.dirty = wantSuspended, true
				}
				kept = append(kept, *v.rec)
				adopted = append(adopted, adoption{v, inst})
				r.insertLocked(v)
				r.log.Info("registry: microVM re-adopted", "microvm", v.id, "state", string(v.pub.State))
				continue
			}
			r.log.Warn("registry: sandbox lost across a restart", "microvm", v.id, "err", err)
			if err := r.launcher.Cleanup(*v.rec); err != nil {
				r.log.Warn("registry: cleanup of a lost sandbox failed", "microvm", v.id, "err", err)
			}
			v.pub.StateReason = ReasonPlatformLost
			r.insertLocked(v)
			r.finish(v)
		default:
			// Interrupted while starting or stopping (or RUNNING without
			// a record): it cannot be trusted, so stop whatever is left.
			if v.rec != nil {
				r.stopInterrupted(ctx, v)
			}
			if v.pub.State != microvmsapi.StateTerminating || v.pub.StateReason == "" {
				v.pub.StateReason = ReasonPlatformLost
			}
			r.insertLocked(v)
			r.finish(v)
		}
	}
	if err := r.launcher.Sweep(kept); err != nil {
		r.log.Warn("registry: sweep of sandbox leftovers failed", "err", err)
	}
	// Sandbox directories without a state file belong to nobody.
	for _, e := range entries {
		if e.IsDir() && validID(e.Name()) && !known[e.Name()] {
			if err := os.RemoveAll(filepath.Join(r.vmsDir, e.Name())); err != nil {
				r.log.Warn("registry: cannot remove an orphan sandbox directory", "microvm", e.Name(), "err", err)
			}
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range adopted {
		v := a.v
		deadline := t
		if v.pub.StartedAt != nil {
			deadline = v.pub.StartedAt.Add(time.Duration(v.pub.MaximumDurationInSeconds) * time.Second)
		}
		r.armTimerLocked(v, deadline.Sub(t))
		r.wg.Add(1)
		go r.lifecycle(v, nil, "", a.inst)
	}
	return nil
}

// loadAll loads the state files among entries (the state dir's), skipping
// unreadable ones and removing writes cut short; known holds every id with
// a state file.
func (r *Registry) loadAll(entries []os.DirEntry) (loaded []*vm, known map[string]bool) {
	known = map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			_ = os.Remove(filepath.Join(r.vmsDir, name)) // a write cut short by a crash
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || e.IsDir() || !validID(id) {
			continue
		}
		known[id] = true
		v, err := r.load(id)
		if err != nil {
			r.log.Warn("registry: ignoring an unreadable state file", "microvm", id, "err", err)
			continue
		}
		loaded = append(loaded, v)
		if v.seq > r.seq.Load() {
			r.seq.Store(v.seq)
		}
	}
	return loaded, known
}

// stopInterrupted stops what is left of v's sandbox (by its record), which
// was interrupted while starting or stopping.
func (r *Registry) stopInterrupted(ctx context.Context, v *vm) {
	inst, err := r.launcher.Adopt(*v.rec)
	if err != nil {
		if err := r.launcher.Cleanup(*v.rec); err != nil {
			r.log.Warn("registry: cleanup of a lost sandbox failed", "microvm", v.id, "err", err)
		}
		return
	}
	tctx, cancel := context.WithTimeout(ctx, r.teardownTO)
	defer cancel()
	if err := inst.Terminate(tctx); err != nil {
		r.log.Warn("registry: teardown of an interrupted sandbox failed", "microvm", v.id, "err", err)
	}
}
