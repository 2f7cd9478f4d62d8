// Package mounts3 is rayito's S3 mount helper: the program rayd starts,
// as uid 990 without capabilities, to serve one S3 mount over a FUSE
// descriptor rayd has already mounted. It implements the subset of AWS's
// mount-s3 command line rayd uses, so rayd can start either:
//
//	rayito-mount-s3 [--read-only] [--allow-overwrite] [--allow-delete]
//	    [--prefix P] [--uid N] [--gid N] [--region R] [--endpoint-url URL]
//	    [--force-path-style] [--foreground] BUCKET /dev/fd/3
//
// Credentials come only from the instance metadata service (the execution
// role on AWS; the local platform's metadata service locally): nothing on
// the command line or in the environment is a credential. On the local
// platform (--rayito-broker-fd) every connection, to the metadata service
// and to S3, is one rayd dials for the helper and hands over on a socket
// pair (SCM_RIGHTS): the platform's socket serves rayd alone.
//
// The exit code says why a mount could not start: wire.ExitNetwork,
// wire.ExitIAMDenied, wire.ExitNotFound, or 1 for anything else; 0 after the mount
// is gone.
package mounts3

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/rayito-dev/rayito/rayd/internal/s3fs"
	"github.com/rayito-dev/rayito/rayd/internal/s3mount/wire"
)

// checkTimeout bounds the first request to S3.
const checkTimeout = 12 * time.Second

// Main runs the helper with args (without the program name) and returns
// its exit code. It writes only fixed messages to stderr: never a
// bucket, a key, a URL or a credential.
func Main(args []string, stderr io.Writer) int {
	fl := flag.NewFlagSet("rayito-mount-s3", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var o s3fs.Options
	var region, endpoint string
	var uid, gid uint
	var brokerFD int
	fl.BoolVar(&o.ReadOnly, "read-only", false, "refuse every change")
	fl.BoolVar(&o.AllowOverwrite, "allow-overwrite", false, "allow replacing files (opened with O_TRUNC)")
	fl.BoolVar(&o.AllowDelete, "allow-delete", false, "allow deleting files")
	fl.StringVar(&o.Prefix, "prefix", "", "key prefix, ending in /")
	fl.UintVar(&uid, "uid", 0, "owner of files")
	fl.UintVar(&gid, "gid", 0, "group of files")
	fl.StringVar(&region, "region", "", "region (default: the metadata service's)")
	fl.StringVar(&endpoint, "endpoint-url", "", "S3 endpoint")
	fl.Bool("force-path-style", false, "path-style requests (always with --endpoint-url)")
	fl.Bool("foreground", false, "accepted: the helper always runs in the foreground")
	fl.Bool("f", false, "accepted: the helper always runs in the foreground")
	fl.Bool("allow-other", false, "accepted: rayd mounts with allow_other")
	fl.IntVar(&brokerFD, "rayito-broker-fd", -1, "descriptor of the connection broker (local platform)")
	if err := fl.Parse(args); err != nil || fl.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: rayito-mount-s3 [flags] BUCKET /dev/fd/N")
		return wire.ExitUsage
	}
	o.Bucket, o.UID, o.GID = fl.Arg(0), uint32(uid), uint32(gid)
	mnt := fl.Arg(1)
	if !strings.HasPrefix(mnt, "/dev/fd/") {
		fmt.Fprintln(stderr, "rayito-mount-s3: the mount point must be a FUSE descriptor mounted by rayd (/dev/fd/N)")
		return wire.ExitUsage
	}
	var dial func(ctx context.Context) (net.Conn, error)
	if brokerFD >= 0 {
		dial = wire.NewBroker(brokerFD).Dial
	}
	api, err := newClient(context.Background(), region, endpoint, dial)
	if err != nil {
		fmt.Fprintln(stderr, "rayito-mount-s3: no region from the metadata service")
		return wire.ExitNetwork
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	err = s3fs.Check(ctx, api, o)
	cancel()
	if err != nil {
		class := s3fs.Class(err)
		fmt.Fprintln(stderr, "rayito-mount-s3: the bucket could not be listed:", class)
		switch class {
		case "network":
			return wire.ExitNetwork
		case "iam_denied":
			return wire.ExitIAMDenied
		case "not_found":
			return wire.ExitNotFound
		}
		return wire.ExitFailed
	}
	srv, err := fs.Mount(mnt, s3fs.New(api, o), s3fs.MountOptions())
	if err != nil {
		fmt.Fprintln(stderr, "rayito-mount-s3: serving the FUSE descriptor failed")
		return wire.ExitFailed
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-sig:
		// rayd unmounts; the descriptor closes with this process.
	}
	return 0
}

// newClient returns the S3 client: credentials from the metadata
// service only, region from --region or the metadata service.
func newClient(ctx context.Context, region, endpoint string, dial func(ctx context.Context) (net.Conn, error)) (*s3.Client, error) {
	tr := &http.Transport{Proxy: nil, MaxIdleConns: 16, IdleConnTimeout: 30 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 60 * time.Second, ForceAttemptHTTP2: dial == nil}
	if dial != nil {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }
	} else {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		tr.DialContext = d.DialContext
	}
	hc := &http.Client{Transport: tr}
	ic := imds.New(imds.Options{Endpoint: os.Getenv(wire.IMDSEnv), HTTPClient: &http.Client{Transport: tr, Timeout: 3 * time.Second},
		Logger: logging.Nop{}, Retryer: aws.NopRetryer{}})
	if region == "" {
		r, err := ic.GetRegion(ctx, &imds.GetRegionInput{})
		if err != nil {
			return nil, errors.New("no region")
		}
		region = r.Region
	}
	creds := aws.NewCredentialsCache(ec2rolecreds.New(func(o *ec2rolecreds.Options) { o.Client = ic }))
	o := s3.Options{Region: region, Credentials: creds, HTTPClient: hc, Logger: logging.Nop{},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired}
	if endpoint != "" {
		o.BaseEndpoint, o.UsePathStyle = aws.String(endpoint), true
	}
	return s3.New(o), nil
}
