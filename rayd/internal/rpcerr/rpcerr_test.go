package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"connectrpc.com/connect"
)

func TestCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want connect.Code
	}{
		{context.Canceled, connect.CodeCanceled},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), connect.CodeDeadlineExceeded},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, connect.CodeNotFound},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, connect.CodePermissionDenied},
		{syscall.EEXIST, connect.CodeAlreadyExists},
		{syscall.ELOOP, connect.CodeFailedPrecondition},
		{syscall.ENOSPC, connect.CodeResourceExhausted},
		{connect.NewError(connect.CodeOutOfRange, errors.New("x")), connect.CodeOutOfRange},
		{errors.New("boom"), connect.CodeInternal},
	}
	for _, c := range cases {
		if got := Code(c.err); got != c.want {
			t.Errorf("Code(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestWrapHidesCause(t *testing.T) {
	t.Parallel()
	err := Wrap(&fs.PathError{Op: "open", Path: "/secret/path", Err: syscall.ENOENT}, "file not found")
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound || ce.Message() != "file not found" {
		t.Fatalf("Wrap = %v", err)
	}
	if Wrap(nil, "x") != nil {
		t.Fatal("Wrap(nil) != nil")
	}
}
