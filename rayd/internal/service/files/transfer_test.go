package files_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// TestTransferRPCs: the transfer RPCs are served (package transfer has
// the URL policy's and the transfers' own tests): a URL off the policy is
// INVALID_ARGUMENT before any I/O, naming the rule and not the URL; an
// unknown transfer is NOT_FOUND; an object bound to another sandbox is
// refused.
func TestTransferRPCs(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	ctx := context.Background()
	c := h.Files()
	obj := &raydv1.S3Object{Bucket: "bucket", Key: "rayito-transfer/microvm-test/up/f", Region: "us-east-1"}
	_, err := c.StartImport(ctx, connect.NewRequest(&raydv1.StartImportRequest{Object: obj,
		Get: &raydv1.PresignedRequest{Url: "https://169.254.169.254/latest/meta-data/iam/security-credentials/"}, Path: "f"}))
	if raydtest.CodeOf(err) != connect.CodeInvalidArgument || strings.Contains(err.Error(), "169.254") {
		t.Errorf("IMDS URL: %v", err)
	}
	other := &raydv1.S3Object{Bucket: "bucket", Key: "rayito-transfer/microvm-other/up/f", Region: "us-east-1"}
	_, err = c.StartImport(ctx, connect.NewRequest(&raydv1.StartImportRequest{Object: other,
		Get: &raydv1.PresignedRequest{Url: "https://bucket.s3.us-east-1.amazonaws.com/rayito-transfer/microvm-other/up/f"}, Path: "f"}))
	if raydtest.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "bound to this sandbox") {
		t.Errorf("another sandbox's key: %v", err)
	}
	_, err = c.GetTransfer(ctx, connect.NewRequest(&raydv1.GetTransferRequest{TransferId: "tr-nope"}))
	if raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("unknown transfer: %v", err)
	}
	_, err = c.CancelTransfer(ctx, connect.NewRequest(&raydv1.CancelTransferRequest{TransferId: "tr-nope"}))
	if raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("cancel unknown: %v", err)
	}
}
