// Package hostnet is the host's side of localvm's sandbox networking for
// privileged sandboxes: each sandbox's veth pair (host side up with the
// first address of its /30, eth0 in the sandbox's network namespace with
// the second, lo up and a default route) through [Veths], and one
// nftables table of rules per platform scope through [Firewall]: the host's
// own services unreachable from sandboxes, nothing forwarded into one,
// link-local destinations dropped, and, per sandbox with Internet
// access, an egress accept and a masquerade rule. [EnableForwarding] turns
// IPv4 forwarding on (never off); [FlushConntrack] and [SweepConntrack]
// delete the connection tracking entries a sandbox's address leaves
// behind.
//
// It does not choose addresses, veth names or table names (its caller
// does, see [Names]), does not configure anything inside a sandbox beyond
// its veth's address and route (rayd programs its own egress policy), and
// has nothing to do with rootless sandboxes, whose user-space network
// stack (slirp4netns) the launcher runs.
//
// The kernel sits behind two small interfaces, [Netlink] (a
// *netlink.Handle) and [NFT] (a *nftables.Conn), so that the sequence of
// netlink calls and the rules installed are tested on fakes without root.
// The package is named for the host's network namespace it acts in; it is
// not "netns", the name of the vishvananda/netns package it uses.
package hostnet
