package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// statfs(2) magic numbers of /sys/fs/cgroup.
const (
	cgroup2Magic = 0x63677270
	tmpfsMagic   = 0x01021994
	cgroupMagic  = 0x27e0eb
)

// sandboxPATH is an isolated sandbox's PATH (localvm's launcher): the
// code interpreter's python3 is found there, not on the caller's PATH.
const sandboxPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// cgroupRoot is where cgroups are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// noUserNSEnv is localvm's launcher's switch (RAYITO_LOCALVM_NO_USERNS=1)
// that makes a launcher that is not root act as if unprivileged user
// namespaces were unusable.
const noUserNSEnv = "RAYITO_LOCALVM_NO_USERNS"

// The fix for unusable unprivileged user namespaces (launcher's wording).
const usernsFix = "run as root, or allow unprivileged user namespaces: sysctl user.max_user_namespaces (above 0), kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0"

func localChecks() []func(context.Context, *Env) Check {
	return []func(context.Context, *Env) Check{
		checkRoot, checkUserNS, checkCgroups, checkNftables,
		checkSlirp, checkPython, checkPort, checkSandbox,
	}
}

func checkRoot(_ context.Context, e *Env) Check {
	const name = "root"
	if uid := e.Geteuid(); uid != 0 {
		return warn(name, fmt.Sprintf("not root (uid %d): sandboxes get rootless isolation at best (no memory or pids limits, no network policy, Internet only through slirp4netns)", uid),
			"run as root (sudo) for full isolation")
	}
	return pass(name, "running as root: full isolation (namespaces, a uid range per sandbox, cgroup limits, network policy)")
}

func checkUserNS(ctx context.Context, e *Env) Check {
	const name = "user namespaces"
	root := e.Geteuid() == 0
	if !root && e.Getenv(noUserNSEnv) == "1" {
		return fail(name, noUserNSEnv+"=1 turns unprivileged user namespaces off: sandboxes cannot be isolated without root",
			"unset "+noUserNSEnv+", or run as root")
	}
	err := timed(ctx, probeTimeout, func(ctx context.Context) Check {
		return Check{Detail: errText(e.RunInUserNS(ctx, "/bin/true"))}
	}).Detail
	switch {
	case err == "":
		if root {
			return pass(name, "a child starts in a new user namespace: each sandbox gets a uid range of its own")
		}
		return pass(name, "unprivileged user namespaces are usable: rootless isolation")
	case strings.Contains(err, "no such file"):
		return warn(name, "not checked: /bin/true not found", "install coreutils")
	case root:
		return warn(name, "user namespaces are not usable ("+err+"): every sandbox's user is host uid 1000, shared between sandboxes",
			"check sysctl user.max_user_namespaces (above 0); in a container, allow namespace creation")
	}
	return fail(name, "unprivileged user namespaces are not usable ("+err+"): sandboxes cannot be isolated without root (rayito run needs --unisolated, NOT isolated)", usernsFix)
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "no such file"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

func checkCgroups(_ context.Context, e *Env) Check {
	const name = "cgroups"
	root := e.Geteuid() == 0
	t, err := e.FSType(cgroupRoot)
	if err != nil {
		if root {
			return fail(name, cgroupRoot+" is not mounted: sandboxes get no memory or pids limits and root launches fail", "mount cgroup2 on "+cgroupRoot)
		}
		return warn(name, cgroupRoot+" is not mounted", "mount cgroup2 on "+cgroupRoot+" (limits need root anyway)")
	}
	var version string
	var missing []string
	switch t {
	case cgroup2Magic:
		version = "v2"
		ctl, _ := e.ReadFile(path.Join(cgroupRoot, "cgroup.controllers"))
		have := strings.Fields(string(ctl))
		for _, c := range []string{"memory", "pids"} {
			if !contains(have, c) {
				missing = append(missing, c)
			}
		}
	case tmpfsMagic:
		version = "v1"
		if ut, err := e.FSType(path.Join(cgroupRoot, "unified")); err == nil && ut == cgroup2Magic {
			version = "v1 (hybrid)"
		}
		for _, c := range []string{"memory", "pids", "freezer"} {
			if !e.Exists(path.Join(cgroupRoot, c)) {
				missing = append(missing, c)
			}
		}
	case cgroupMagic:
		version = "v1"
	default:
		return warn(name, fmt.Sprintf("%s is not a cgroup mount (type %#x)", cgroupRoot, t), "mount cgroup2 on "+cgroupRoot)
	}
	if root {
		if len(missing) > 0 {
			return fail(name, "cgroup "+version+" without the "+strings.Join(missing, ", ")+" controller(s): root launches fail",
				"enable the controllers (cgroup v2 with memory and pids, or v1 memory, pids and freezer)")
		}
		return pass(name, "cgroup "+version+": memory and pids limits available")
	}
	if version == "v2" {
		if dir, ok := delegated(e); ok {
			return pass(name, "cgroup v2; a delegated writable cgroup exists ("+dir+"), but localvm does not use it: memory and pids limits need root")
		}
		return warn(name, "cgroup v2, no delegated writable cgroup for this user: sandboxes get no memory or pids limits",
			"run as root for limits (localvm uses no delegated cgroup without root)")
	}
	return warn(name, "cgroup "+version+": no delegation without root, so sandboxes get no memory or pids limits",
		"run as root for limits")
}

// delegated returns this process's cgroup v2 directory when this user may
// write it (a delegated subtree).
func delegated(e *Env) (string, bool) {
	b, err := e.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		rel, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		dir := path.Join(cgroupRoot, path.Clean("/"+rel))
		if e.Writable(dir) && e.Writable(path.Join(dir, "cgroup.procs")) {
			return dir, true
		}
		return "", false
	}
	return "", false
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func checkNftables(ctx context.Context, e *Env) Check {
	const name = "nftables"
	if e.Geteuid() != 0 {
		return warn(name, "not checked: needs root (a rootless platform uses no nftables; network policy needs a root platform)",
			"run `sudo rayito doctor` to check it")
	}
	c := timed(ctx, probeTimeout, func(ctx context.Context) Check {
		return Check{Detail: errText(e.Netfilter(ctx))}
	})
	if c.Detail != "" {
		return fail(name, "nf_tables does not answer over netlink ("+c.Detail+"): sandboxes' network policy cannot be enforced",
			"load nf_tables (modprobe nf_tables); in a container, grant CAP_NET_ADMIN")
	}
	return pass(name, "nf_tables answers over netlink")
}

func checkSlirp(_ context.Context, e *Env) Check {
	const name = "slirp4netns"
	p, err := e.LookPath("slirp4netns")
	root := e.Geteuid() == 0
	switch {
	case err != nil && root:
		return pass(name, "not found, not needed as root (root sandboxes reach the Internet through a veth and nftables)")
	case err != nil:
		return warn(name, "not found on PATH: rootless sandboxes have no Internet access",
			"install slirp4netns (apt install slirp4netns), or run as root")
	case root:
		return pass(name, "found at "+p+" (used only without root)")
	}
	if err := e.OpenRW("/dev/net/tun"); err != nil {
		return warn(name, "found at "+p+", but /dev/net/tun is not usable by this user ("+errText(err)+"): rootless sandboxes have no Internet access",
			"make /dev/net/tun mode 0666 (udev does by default), or run as root")
	}
	return pass(name, "found at "+p+": rootless sandboxes can reach the Internet")
}

func checkPython(ctx context.Context, e *Env) Check {
	const name = "python3 ipykernel"
	const fix = "install python3 and ipykernel (apt install python3-ipykernel, or pip install ipykernel)"
	p := ""
	for _, dir := range strings.Split(sandboxPATH, ":") {
		if c := path.Join(dir, "python3"); e.Exists(c) {
			p = c
			break
		}
	}
	if p == "" {
		return warn(name, "python3 not found on the sandboxes' PATH ("+sandboxPATH+"): the code interpreter (rayito sandbox code, rayito run --code) is unavailable", fix)
	}
	c := timed(ctx, probeTimeout, func(ctx context.Context) Check {
		return Check{Detail: errText(e.Run(ctx, p, "-c", "import ipykernel"))}
	})
	if c.Detail != "" {
		return warn(name, p+" cannot import ipykernel ("+c.Detail+"): the code interpreter is unavailable", fix)
	}
	return pass(name, p+" imports ipykernel")
}

func checkPort(ctx context.Context, e *Env) Check {
	const name = "port"
	addr, err := platform.ListenAddr(e.Getenv)
	if err != nil {
		return fail(name, cliutil.Describe(err), "fix --endpoint or RAYITO_ENDPOINT, or unset it (default "+rayito.DefaultLocalEndpoint+")")
	}
	ep := platform.Endpoint(e.Getenv)
	if e.Answers(ctx, ep) {
		return pass(name, "a Rayito platform answers at "+ep)
	}
	err = e.Listen(addr)
	switch {
	case err == nil:
		return pass(name, addr+" is free for `rayito local up`")
	case errors.Is(err, syscall.EADDRINUSE):
		return warn(name, addr+" is in use by a program that is not a Rayito platform: `rayito local up` cannot listen there (rayito run still works)",
			"stop that program, or choose another port with --endpoint or RAYITO_ENDPOINT")
	}
	return warn(name, "cannot listen on "+addr+" ("+errText(err)+")", "choose another address with --endpoint or RAYITO_ENDPOINT")
}

func checkSandbox(ctx context.Context, e *Env) Check {
	const name = "sandbox"
	var (
		r   SandboxResult
		err error
	)
	timed(ctx, sandboxTimeout, func(ctx context.Context) Check {
		r, err = e.Sandbox(ctx, e.Getenv)
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("timed out after %s", sandboxTimeout)
		}
		return Check{}
	})
	switch {
	case errors.Is(err, localvm.ErrUnisolated):
		return warn(name, "skipped: sandboxes cannot be isolated here (not root, and no unprivileged user namespaces)", usernsFix)
	case err != nil:
		return fail(name, "create, run `true` and kill failed: "+cliutil.Describe(err),
			"see the checks above; RAYITO_DEBUG=1 rayito run -- true shows the platform's log")
	}
	where := fmt.Sprintf("an in-process platform (started in %s)", r.Startup.Round(time.Millisecond))
	if !r.InProcess {
		where = "the platform at " + r.Endpoint
	}
	detail := fmt.Sprintf("created, ran `true` and killed in %s on %s (isolation %s)", r.Elapsed.Round(time.Millisecond), where, r.Isolation)
	if r.Isolation == rayito.IsolationNone {
		return warn(name, detail+": that platform's sandboxes are NOT isolated", "restart it without --unisolated, as root or with unprivileged user namespaces")
	}
	return pass(name, detail)
}
