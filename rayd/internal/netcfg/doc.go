// Package netcfg makes the guest's packet filter and policy routing match a
// sandbox's egress policy ([netpolicy.Policy]). It is a declarative
// reconciler: [Reconciler.Set] computes the whole desired state and
// replaces what is installed; it owns exactly one nftables table (family
// inet, named rayd_egress) and two policy routing rules, and touches
// nothing else.
//
// # What is installed
//
// Every rule applies only to sockets of the sandbox uids (Options.UIDMin to
// Options.UIDMax, default 1000-65535, matched with meta skuid). rayd runs
// as root and is never filtered: its proxy, its DNS forwarder and its own
// traffic (persistence, presigned transfers) are outside these rules.
// Packets without a socket (kernel replies, forwarded traffic) never enter
// the sandbox chains.
//
//	table inet rayd_egress {
//	  set allow4 { type ipv4_addr; flags interval }   # allow_out CIDRs, merged
//	  set allow6 { type ipv6_addr; flags interval }
//	  set deny4  { type ipv4_addr; flags interval }   # deny_out CIDRs, merged
//	  set deny6  { type ipv6_addr; flags interval }
//	  set proxy_ports { type inet_service }            # Policy.HostPorts()
//	  set intercept_ports { type inet_service }        # Policy.InterceptPorts()
//	  chain reject {                                   # how a denial looks
//	    meta l4proto tcp reject with tcp reset
//	    reject with icmpx admin-prohibited
//	  }
//	  chain output { type filter hook output priority 0; policy accept
//	    meta skuid 1000-65535 jump sandbox_out
//	  }
//	  chain sandbox_out {
//	    udp dport 53 jump reject           # only under deny-all without hosts
//	    tcp dport 53 jump reject           # (also before lo: see below)
//	    oifname "lo" accept
//	    ip daddr 127.0.0.0/8 accept        # redirected packets (see below)
//	    ip6 daddr ::1 accept
//	    ip daddr 169.254.169.254 jump reject
//	    ip6 daddr fd00:ec2::254 jump reject
//	    ip daddr @allow4 accept            # only when not unrestricted and
//	    ip6 daddr @allow6 accept           # the set is not empty
//	    ip daddr @deny4 jump reject
//	    ip6 daddr @deny6 jump reject
//	  }                                    # falls through: accept
//	  chain nat_output { type nat hook output priority -100; policy accept
//	    meta skuid 1000-65535 jump sandbox_nat
//	  }
//	  chain sandbox_nat {                  # empty unless the policy has hosts
//	    udp dport 53 redirect to :DNSPort  # (or intercept ports under deny-all)
//	    tcp dport 53 redirect to :DNSPort
//	    oifname "lo" return
//	    ip daddr 127.0.0.0/8 return
//	    ip6 daddr ::1 return
//	    ip daddr 169.254.169.254 return    # left to the filter, which rejects
//	    ip6 daddr fd00:ec2::254 return
//	    tcp dport @intercept_ports redirect to :ProxyPort  # only with intercept ports
//	    ip daddr @allow4 return            # allowed directly: not proxied
//	    ip6 daddr @allow6 return
//	    tcp dport @proxy_ports redirect to :ProxyPort
//	  }
//	}
//
// Every rule carries a comment "rayd_egress:<digest of the desired
// state>", which verification compares, so that a table someone else
// rewrote does not pass for ours.
//
// # Why these rules
//
// Allow beats deny and an address neither allowed nor denied is allowed,
// exactly as [netpolicy.Policy.AllowsIP]; the sets are interval sets (one
// per family, the policy's prefixes merged into disjoint ranges), so a
// lookup costs the same for 1 or 256 entries.
//
// Denials use reject, not drop: a TCP connect gets a reset and fails at
// once instead of hanging for its SYN retries, UDP gets an ICMP
// administratively-prohibited error, and, because the filter sees every
// packet and not only the first of a connection, a connection that was
// open when its destination became denied is cut on its next packet
// (there is deliberately no "ct state established accept").
//
// Loopback is open because the sandbox's own services, rayd's proxy and
// DNS forwarder and the secret gateway listen there. The one exception is
// DNS under deny-all without hosts: port 53 is rejected before the
// loopback rule too, because the platform resolver may listen on a local
// address and would otherwise relay queries (and data in them) out of the
// VM.
//
// The cloud metadata service (169.254.169.254 and fd00:ec2::254) is
// rejected for sandbox uids whatever the policy allows, even with
// ALL_TRAFFIC in allow_out, and twice: by the filter above and by policy
// routing rules (see below), so that a mistake in, or the removal of, one
// layer does not expose the instance's credentials.
//
// When the policy has host rules, TCP to one of their ports that is not
// allowed directly is redirected to rayd's proxy on 127.0.0.1:ProxyPort
// (transparent proxying: the proxy reads the original destination with
// SO_ORIGINAL_DST and the name from the TLS SNI or the HTTP Host header)
// and DNS goes to rayd's forwarder on 127.0.0.1:DNSPort, which answers
// only allowed names. A redirect in the nat OUTPUT hook rewrites the
// destination of locally generated packets and the kernel reroutes them
// through lo, so net.ipv4.conf.*.route_localnet is not needed (it is for
// packets arriving from another interface, redirected in PREROUTING; the
// root tests check the OUTPUT case with real traffic). The kernel reroutes
// the packet after the nat hook but the filter hook that follows in the
// same traversal still sees the interface of the first route, not lo:
// that is why loopback is also accepted by destination address. IPv6 packets are
// redirected to [::1] on the same ports: the proxy and forwarder should
// listen there too, or such connections are refused (closed, not open).
// The nat hook only sees the first packet of a connection, which is why
// every denial is in the filter hook.
//
// Intercept ports (Policy.WithIntercept: the ports of the hosts that
// secret placeholders name) send every TCP connection to those ports to the
// proxy, even to addresses allowed directly: the proxy terminates TLS only
// for the placeholders' hosts and treats every other connection as the
// direct path would (by its original destination when the name is not
// allowed).
//
// # Atomic swap and rollback
//
// Set sends the whole table in one nftables transaction: "add table" (a
// no-op when it exists), "delete table" and the new table with its sets,
// chains and rules in one batch, which the kernel applies entirely or not
// at all, so there is no moment without rules and no half-installed
// policy. Set then verifies by reading back the tables, chains, the number
// and comment of the rules of each chain, and the elements of each set,
// and checks the policy routing rules. On any failure (the batch, the
// routing rules or the verification) it installs deny-all (everything from
// the sandbox uids rejected except loopback, DNS included) and returns an
// error wrapping [ErrInstall] or [ErrVerify]: a failure never leaves an
// open sandbox. Setting the policy that is installed sends nothing;
// [Reconciler.Verify] re-reads the kernel's state (on /run and /resume)
// and reinstalls the policy when it drifted.
//
// # Policy routing
//
// Two rules, "uidrange UIDMin-UIDMax to 169.254.169.254/32 prohibit" and
// "uidrange UIDMin-UIDMax to fd00:ec2::254/128 prohibit", at priority
// [RulePriority] (50: ahead of the main table at 32766 and of the per-uid
// routing rules of the Routes mode at 100-151), make a route lookup from a
// sandbox socket to the metadata service fail with EACCES before a packet
// exists. They are added if missing, checked on each verification and
// removed by [Reconciler.Close]. (The netlink library does not report a
// rule's action when listing, so a rule is recognized by its priority,
// family, destination, uid range and the absence of a lookup table.)
//
// # Testing
//
// The kernel is reached through two small interfaces, [NFT] (the methods
// of *nftables.Conn the reconciler uses) and [RuleConn] (netlink's rule
// list, add and delete). Tests without root run the reconciler against
// in-memory fakes that apply batches atomically like the kernel and can
// fail or drift on demand, and against a real *nftables.Conn whose netlink
// socket is replaced by nftables.WithTestDial to check that one Set is one
// batch. Tests as root build fresh network namespaces (the machine's own
// is never touched) and check the rules with real traffic from a process
// running as uid 1000.
package netcfg
