package cliutil

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestResolveIDs(t *testing.T) {
	t.Parallel()
	const (
		a1 = "microvm-3f2a0000-0000-4000-8000-000000000001"
		a2 = "microvm-3f2a0000-0000-4000-8000-000000000002"
		b  = "microvm-b7000000-0000-4000-8000-000000000003"
		c  = "microvm-3f9b0000-0000-4000-8000-000000000004"
		d  = "microvm-3f9c0000-0000-4000-8000-000000000005"
	)
	all := []Candidate{{a1, "RUNNING"}, {a2, "TERMINATED"}, {b, "RUNNING"}, {c, "SUSPENDED"}, {d, "RUNNING"}}
	calls := 0
	list := func(context.Context) ([]Candidate, error) { calls++; return all, nil }
	ctx := context.Background()
	for _, tc := range []struct {
		args  []string
		want  []string
		calls int
	}{
		{[]string{b}, []string{b}, 0},                                           // a whole id: no call
		{[]string{"microvm-00000000-0000-4000-8000-00000000000f"}, nil, 0},      // unknown, yet whole: no call
		{[]string{"b70"}, []string{b}, 1},                                       // the UUID's prefix
		{[]string{"B7"}, []string{b}, 1},                                        // any case
		{[]string{"microvm-b"}, []string{b}, 1},                                 // the id's prefix
		{[]string{"3f2a0000-0000-4000-8000-000000000002"}, []string{a2}, 0},     // a whole UUID
		{[]string{"b7000000-0000-4000-8000-00000000000"}, []string{b}, 1},       // one digit short
		{[]string{"b7", "3f9b", "microvm-b7"}, []string{b, c}, 1},               // one call, each id once
		{[]string{"3f2a0000-0000-4000-8000-000000000001", a1}, []string{a1}, 0}, // duplicates dropped
	} {
		calls = 0
		got, err := ResolveIDs(ctx, tc.args, list)
		if tc.want == nil {
			tc.want = tc.args
		}
		if err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") || calls != tc.calls {
			t.Errorf("ResolveIDs(%q) = %q, %v after %d calls; want %q after %d", tc.args, got, err, calls, tc.want, tc.calls)
		}
	}

	// Ambiguous: a few candidates named with their state, exit 1.
	_, err := ResolveIDs(ctx, []string{"3f"}, list)
	var amb *AmbiguousIDError
	if !errors.As(err, &amb) || len(amb.Matches) != 4 {
		t.Fatalf("3f: %v", err)
	}
	msg, code := Exit(err)
	want := "sandbox id 3f matches 4 sandboxes: " + a1 + " (RUNNING), " + a2 + " (TERMINATED), " + c + " (SUSPENDED) and 1 more; give more of the id"
	if msg != want || code != ExitError {
		t.Errorf("3f: %q exit %d\nwant %q exit 1", msg, code, want)
	}
	// Nothing is resolved when one argument fails.
	if ids, err := ResolveIDs(ctx, []string{"b7", "3f9"}, list); ids != nil || !errors.As(err, &amb) {
		t.Errorf("b7 3f9: %q %v", ids, err)
	}

	// No match: not found, exit 1.
	_, err = ResolveIDs(ctx, []string{"deadbeef"}, list)
	if msg, code := Exit(err); msg != "sandbox deadbeef not found" || code != ExitError || !errors.Is(err, ErrNoSandbox) {
		t.Errorf("deadbeef: %q exit %d", msg, code)
	}

	// What cannot begin an id: refused before any call, as before.
	for _, bad := range []string{"", "garbage", "microvm-", "microvm-xyz", "3f2a0000-0000-4000-8000-0000000000012", "microvm-3f2a_", "-3f", "microvm-3f2a0000-0000-4000-8000-000000000001/x"} {
		calls = 0
		_, err := ResolveIDs(ctx, []string{bad}, list)
		if bad == "microvm-" {
			// A prefix of every id.
			if !errors.As(err, &amb) {
				t.Errorf("%q: %v", bad, err)
			}
			continue
		}
		if msg, _ := Exit(err); !strings.HasSuffix(msg, "not found (sandbox ids look like microvm-<uuid>)") || calls != 0 {
			t.Errorf("%q: %q after %d calls", bad, msg, calls)
		}
	}

	// The list's own error is returned as it is.
	boom := errors.New("no local platform")
	if _, err := ResolveIDs(ctx, []string{"b7"}, func(context.Context) ([]Candidate, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("list error: %v", err)
	}
}
