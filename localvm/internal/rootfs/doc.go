// Package rootfs builds the pieces of a localvm sandbox's root filesystem,
// from inside the sandbox's init, in its private mount namespace: the
// root's tmpfs ([Base]), the host's /bin, /sbin and /lib* ([HostDirs]), a
// generated read-only /etc ([Etc]: passwd, group, hosts, hostname,
// nsswitch.conf, a resolv.conf from the host's resolvers ([ResolvConf])
// and an allow-list of the host's public files), the private tmpfs of
// bounded size ([Scratch], [TmpfsSizes]), /proc ([Proc]), a minimal /dev
// with its own devpts ([Dev]), read-only bind mounts ([BindReadOnly]) and
// the final pivot_root ([Pivot]).
//
// It does not decide the order of the steps or what goes on /usr (the
// launcher's init composes them with a template's layers, the sandbox's
// programs and, for rootless sandboxes, the read-only remounts and
// routes), does not create namespaces, and copies nothing of the host
// that is not on its allow-lists (no credentials, no /root or /home).
//
// The generators and parsers (/etc files, resolv.conf, tmpfs sizes, the
// copies into /etc) are tested without root; the mount steps need a
// private mount namespace and are exercised by the launcher's root tests,
// which build real sandboxes.
package rootfs
