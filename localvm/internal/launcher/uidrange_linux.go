package launcher

// Each privileged sandbox gets a host identity of its own: a user namespace
// mapping its uids and gids 0–65535 onto a block of 65536 host ids that no
// other sandbox (of any platform on the machine) holds. rayd is root inside
// its namespace only (host uid = the block's base), the sandbox's user 1000
// is base+1000 on the host, so per-uid kernel limits (RLIMIT_NPROC), file
// ownership and signal permissions never cross sandboxes.
//
// Blocks are allocated machine-wide with one file per block in
// uidRangeDir, created O_EXCL (atomic across processes) and holding the
// owning scope's tag and the sandbox id; the block's index is persisted in
// the sandbox's Record, so a restarted platform re-adopts it. Terminate,
// Cleanup and Sweep remove the file once nothing of the sandbox runs.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/rootfs"
)

// The host id ranges sandboxes take their blocks from: 2048 blocks of
// 65536 from 2,000,000,000 (below 2^31, above the ranges /etc/subuid,
// systemd's dynamic users and systemd-nspawn's containers use by default).
const (
	uidRangeBase   = 2_000_000_000
	uidRangeSize   = 65536
	uidRangeBlocks = 2048
)

// uidRangeDir holds the machine-wide allocation files. A variable for
// tests.
var uidRangeDir = "/run/rayito/localvm/uids"

// uidBlockBase is the first host id of block k.
func uidBlockBase(k int) uint32 { return uidRangeBase + uint32(k)*uidRangeSize }

// uidBlockOf returns the block index of a base, or -1.
func uidBlockOf(base uint32) int {
	if base < uidRangeBase || (base-uidRangeBase)%uidRangeSize != 0 {
		return -1
	}
	k := int((base - uidRangeBase) / uidRangeSize)
	if k >= uidRangeBlocks {
		return -1
	}
	return k
}

// uidOwner is the content of an allocation file.
func (l *Launcher) uidOwner(id string) string { return l.n.cgroupParent + " " + id + "\n" }

// subIDRanges returns the ranges /etc/subuid and /etc/subgid delegate, to
// stay clear of them.
func subIDRanges() [][2]uint64 {
	var out [][2]uint64
	for _, p := range []string{"/etc/subuid", "/etc/subgid"} {
		b, err := rootfs.ReadLimited(p, 1<<20)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Split(strings.TrimSpace(sc.Text()), ":")
			if len(f) != 3 {
				continue
			}
			start, err1 := strconv.ParseUint(f[1], 10, 32)
			n, err2 := strconv.ParseUint(f[2], 10, 32)
			if err1 == nil && err2 == nil && n > 0 {
				out = append(out, [2]uint64{start, start + n})
			}
		}
	}
	return out
}

// allocUIDs reserves a free block for sandbox id and returns its base.
func (l *Launcher) allocUIDs(id string) (uint32, error) {
	if err := os.MkdirAll(uidRangeDir, 0o700); err != nil {
		return 0, fmt.Errorf("launcher: uid ranges: %w", err)
	}
	avoid := subIDRanges()
	l.mu.Lock()
	start := l.nextUID
	l.mu.Unlock()
	for i := 0; i < uidRangeBlocks; i++ {
		k := (start + i) % uidRangeBlocks
		lo := uint64(uidBlockBase(k))
		hi := lo + uidRangeSize
		clash := false
		for _, r := range avoid {
			if lo < r[1] && r[0] < hi {
				clash = true
				break
			}
		}
		if clash {
			continue
		}
		f, err := os.OpenFile(filepath.Join(uidRangeDir, strconv.Itoa(k)), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("launcher: uid ranges: %w", err)
		}
		_, err = f.WriteString(l.uidOwner(id))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(f.Name())
			return 0, fmt.Errorf("launcher: uid ranges: %w", err)
		}
		l.mu.Lock()
		l.nextUID = (k + 1) % uidRangeBlocks
		l.mu.Unlock()
		return uidBlockBase(k), nil
	}
	return 0, fmt.Errorf("launcher: no free uid range left (%d blocks of %d from %d, in %s)", uidRangeBlocks, uidRangeSize, uidRangeBase, uidRangeDir)
}

// holdsUIDs reports whether the block of base is allocated to sandbox id
// of this launcher's scope; a missing file is recreated (a cleared /run
// with the sandbox still alive).
func (l *Launcher) holdsUIDs(base uint32, id string) error {
	k := uidBlockOf(base)
	if k < 0 {
		return fmt.Errorf("launcher: record of %s names a uid range outside the launcher's", id)
	}
	p := filepath.Join(uidRangeDir, strconv.Itoa(k))
	b, err := rootfs.ReadLimited(p, 4096)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(uidRangeDir, 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("launcher: uid range of %s: %w", id, err)
		}
		_, err = f.WriteString(l.uidOwner(id))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("launcher: uid range of %s: %w", id, err)
	}
	if string(b) != l.uidOwner(id) {
		return fmt.Errorf("launcher: the uid range of %s is allocated to another sandbox", id)
	}
	return nil
}

// freeUIDs releases the block of base if sandbox id of this scope holds it.
func (l *Launcher) freeUIDs(base uint32, id string) error {
	k := uidBlockOf(base)
	if k < 0 {
		return nil
	}
	p := filepath.Join(uidRangeDir, strconv.Itoa(k))
	b, err := rootfs.ReadLimited(p, 4096)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("launcher: uid range of %s: %w", id, err)
	}
	if string(b) != l.uidOwner(id) {
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("launcher: uid range of %s: %w", id, err)
	}
	return nil
}

// uidAllocations lists this scope's allocations: sandbox id → block base.
func (l *Launcher) uidAllocations() map[string]uint32 {
	out := map[string]uint32{}
	ents, err := os.ReadDir(uidRangeDir)
	if err != nil {
		return out
	}
	prefix := l.n.cgroupParent + " "
	for _, e := range ents {
		k, err := strconv.Atoi(e.Name())
		if err != nil || k < 0 || k >= uidRangeBlocks {
			continue
		}
		b, err := rootfs.ReadLimited(filepath.Join(uidRangeDir, e.Name()), 4096)
		if err != nil {
			continue
		}
		s := string(b)
		if id, ok := strings.CutPrefix(strings.TrimSuffix(s, "\n"), prefix); ok && validID(id) == nil {
			out[id] = uidBlockBase(k)
		}
	}
	return out
}
