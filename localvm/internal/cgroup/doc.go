// Package cgroup manages the cgroups of localvm's privileged sandboxes:
// it detects the machine's layout (cgroup v1 memory, pids and freezer
// hierarchies, or cgroup v2 with the memory and pids controllers), creates
// a sandbox's directories under a parent of its owner's choosing, writes
// their memory and pids limits, moves processes in (v1; v2 uses
// CLONE_INTO_CGROUP with the descriptor [Layout.Create] returns), lists,
// kills (cgroup.kill, else through the freezer, else one SIGKILL per
// member), freezes and thaws them, removes them, and reads their OOM kill
// counter ([ParseOOMKill]).
//
// It does not decide what a sandbox's limits are, name sandboxes (the
// caller validates ids and chooses the parent directory), start
// processes, or use delegated cgroups without root. The kernel's
// interface is its files: the logic that only reads and writes them
// (freezing, the OOM counter, detection from a mount table) is tested on
// plain files and a parsed mountinfo, without root; creating and killing
// real cgroups needs root.
package cgroup
