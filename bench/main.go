// Command bench runs Rayito's side-by-side benchmarks: F (the floor, done
// directly on this machine), R (Rayito through the public SDK against an
// in-process localvm) and optionally P (E2B's envd as a peer), interleaved
// per iteration. See README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	"github.com/rayito-dev/rayito/bench/internal/runner"
	"github.com/rayito-dev/rayito/bench/internal/suites"
	"github.com/rayito-dev/rayito/localvm"
)

func main() {
	localvm.MaybeRunInit()
	suite := flag.String("suite", "all", "comma-separated suites, or all: "+strings.Join(suites.Names(), ","))
	iters := flag.Int("iterations", 0, "cap every suite's measured iterations at N (0: each suite's default)")
	warmup := flag.Int("warmup", -1, "warm-up iterations per suite (-1: each suite's default)")
	jsonOut := flag.Bool("json", false, "print JSON instead of the table")
	peerPath := flag.String("peer", os.Getenv("RAYITO_BENCH_PEER_ENVD"), "path of an E2B envd binary to drive as the peer P (default $RAYITO_BENCH_PEER_ENVD)")
	pinFlag := flag.Bool("pin", false, "pin the harness to CPU 1 and sandboxes, peer and floor children to CPU 0")
	subnet := flag.String("subnet", "10.217.0.0/16", "localvm subnet of this run's platform")
	prebooted := flag.Int("prebooted", 2, fmt.Sprintf("pool size of the second platform, with pre-booted sandboxes, that the create suite also measures (0 to %d; 0: none)", localvm.MaxPrebooted))
	sandboxBinary := flag.String("sandbox-binary", "", "start every sandbox from this rayito-sandbox build (go build ./localvm/cmd/rayito-sandbox; localvm.Options.SandboxBinary), as a released rayito does; default: re-execute this harness binary, as a go-installed rayito does")
	kernelStart := flag.String("kernel-start", "lazy", "when each sandbox's Python kernel starts on the main platform: lazy, preload or eager (localvm.Options.KernelStart)")
	prebootedSubnet := flag.String("prebooted-subnet", "10.212.0.0/16", "localvm subnet of that second platform")
	densityMax := flag.Int("density-max", 100, "last level of the density ramp (levels 10,25,50,100,150,200 up to it)")
	densityWorkers := flag.Int("density-workers", 3, "goroutines creating sandboxes in the density ramp (1-4)")
	memoryN := flag.Int("memory-n", 10, "idle sandboxes of the memory suite")
	idle := flag.Duration("idle", 30*time.Second, "idle wait of the memory suite")
	platformLog := flag.String("platform-log", "", "append the in-process localvm's logs to this file (default: discarded)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile (pprof) of the harness process (client, SDK, in-process platform and endpoint proxy; not rayd) to this file")
	compare := flag.String("compare", "", "compare the -json report given as the argument with the `BASELINES` (comma-separated -json reports of earlier runs; several give the run-to-run spread), metric by metric, and exit: -compare OLD1.json,OLD2.json NEW.json")
	flag.Parse()
	if *compare != "" {
		os.Exit(runCompare(strings.Split(*compare, ","), flag.Args(), *jsonOut))
	}

	prefix, err := netip.ParsePrefix(*subnet)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -subnet:", err)
		os.Exit(2)
	}
	pprefix, err := netip.ParsePrefix(*prebootedSubnet)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -prebooted-subnet:", err)
		os.Exit(2)
	}
	if *prebooted < 0 || *prebooted > localvm.MaxPrebooted {
		fmt.Fprintf(os.Stderr, "bench: -prebooted must be between 0 and %d\n", localvm.MaxPrebooted)
		os.Exit(2)
	}
	stopProfile := func() {}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			os.Exit(2)
		}
		stopProfile = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = runner.Run(ctx, runner.Config{
		Suites: strings.Split(*suite, ","), Iterations: *iters, Warmup: *warmup, JSON: *jsonOut,
		Peer: *peerPath, Pin: *pinFlag, Subnet: prefix, Prebooted: *prebooted, PrebootedSubnet: pprefix, KernelStart: *kernelStart, SandboxBinary: *sandboxBinary,
		DensityMax: *densityMax, DensityWorkers: *densityWorkers, MemoryN: *memoryN, Idle: *idle,
		Args: strings.Join(os.Args[1:], " "), PlatformLog: *platformLog, Stdout: os.Stdout, Stderr: os.Stderr,
	})
	stopProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

// runCompare prints the comparison of the report in args (one path) with
// the baselines; its exit status is 0, or 2 for bad input. A slower
// metric is shown, never an error: the machine is shared.
func runCompare(baselines, args []string, asJSON bool) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "bench: -compare OLD.json[,OLD.json...] NEW.json: give exactly one new report")
		return 2
	}
	var bases []*harness.Report
	for _, p := range baselines {
		r, err := harness.ReadReport(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		bases = append(bases, r)
	}
	latest, err := harness.ReadReport(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	c, err := harness.Compare(bases, latest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(c); err != nil {
			return 1
		}
		return 0
	}
	harness.WriteComparison(os.Stdout, c)
	return 0
}
