// Package reconciler writes the killed event nobody else will: a sandbox
// killed while suspended, or whose rayd died, never prints one.
//
// Each run lists the microVMs of the control plane (ListMicrovms, every
// page) and walks the open-sandbox index of the store (a query of the
// sparse index, never a scan). An open sandbox is gone when the control
// plane lists it TERMINATED, or does not list it and GetMicrovm answers
// not found or TERMINATED, provided its last event is older than Grace
// (a sandbox created a moment ago may not be listed yet). For each gone
// sandbox it writes exactly one killed event with kill_reason unknown,
// generation last+1 and an event id derived from the sandbox id and that
// generation, so a retried run writes the same event (a duplicate, not a
// second one).
package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/rayito-dev/rayito/events/internal/forwarder"
	"github.com/rayito-dev/rayito/events/internal/store"
	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// DefaultGrace is how old a sandbox's last event must be before its
// absence from ListMicrovms counts.
const DefaultGrace = 10 * time.Minute

// pageSize is ListMicrovms' page size and the index's.
const pageSize = 50

// ControlPlane is the part of the Lambda MicroVMs API the reconciler uses
// (*microvms.Client fits).
type ControlPlane interface {
	ListMicrovms(ctx context.Context, in microvms.ListInput) (*microvmsapi.ListMicrovmsOutput, error)
	GetMicrovm(ctx context.Context, id string) (*microvmsapi.Microvm, error)
}

// Reconciler is one run's logic.
type Reconciler struct {
	Store        store.Store
	ControlPlane ControlPlane
	// Grace (DefaultGrace when 0).
	Grace time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives the summary (slog.Default when nil).
	Log *slog.Logger
}

// Summary counts one run.
type Summary struct {
	Open    int `json:"open"`
	Gone    int `json:"gone"`
	Written int `json:"written"`
}

// EventID is the deterministic id of the reconciler's killed event for a
// sandbox at a generation.
func EventID(sandboxID string, generation uint64) string {
	sum := sha256.Sum256([]byte("rayito.reconciler.v1|" + sandboxID + "|" + strconv.FormatUint(generation, 10)))
	return hex.EncodeToString(sum[:events.EventIDLen/2])
}

// Run reconciles once.
func (r *Reconciler) Run(ctx context.Context) (Summary, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	grace := r.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	var sum Summary
	listed := map[string]microvmsapi.State{}
	in := microvms.ListInput{MaxResults: pageSize}
	for {
		out, err := r.ControlPlane.ListMicrovms(ctx, in)
		if err != nil {
			return sum, err
		}
		for _, vm := range out.Items {
			listed[vm.MicrovmID] = vm.State
		}
		if out.NextToken == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	var errs []error
	token := ""
	for {
		page, next, err := r.Store.OpenSandboxes(ctx, token, pageSize)
		if err != nil {
			return sum, err
		}
		for _, sb := range page {
			sum.Open++
			gone, err := r.gone(ctx, sb, listed, now(), grace)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !gone {
				continue
			}
			sum.Gone++
			wrote, err := r.kill(ctx, sb, now())
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if wrote {
				sum.Written++
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	l := r.Log
	if l == nil {
		l = slog.Default()
	}
	l.InfoContext(ctx, "reconciler summary", slog.Int("open", sum.Open), slog.Int("gone", sum.Gone), slog.Int("written", sum.Written), slog.Int("errors", len(errs)))
	return sum, errors.Join(errs...)
}

func (r *Reconciler) gone(ctx context.Context, sb store.Sandbox, listed map[string]microvmsapi.State, now time.Time, grace time.Duration) (bool, error) {
	if st, ok := listed[sb.SandboxID]; ok {
		return st == microvmsapi.StateTerminated, nil
	}
	if now.Sub(time.UnixMilli(sb.LastOccurredAtMs)) < grace {
		return false, nil
	}
	vm, err := r.ControlPlane.GetMicrovm(ctx, sb.SandboxID)
	if errors.Is(err, microvms.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return vm.State == microvmsapi.StateTerminated, nil
}

// kill writes the killed{unknown} event of sb; false when another writer
// got there first (the sandbox is no longer open).
func (r *Reconciler) kill(ctx context.Context, sb store.Sandbox, now time.Time) (bool, error) {
	for try := 0; try < 4; try++ {
		if sb.Killed {
			// Killed already: by rayd (nothing to do) or by a previous run
			// that may have stopped before writing its event.
			if sb.LastEventID != EventID(sb.SandboxID, sb.LastGeneration) {
				return false, nil
			}
			ev := events.Event{
				EventID: sb.LastEventID, SandboxID: sb.SandboxID, Type: events.Killed, KillReason: events.KillUnknown,
				Generation: sb.LastGeneration, OccurredAtMs: sb.LastOccurredAtMs, ImageARN: sb.ImageARN, ExecutionID: sb.ExecutionID,
			}
			if err := r.Store.PutEvent(ctx, ev); err != nil && !errors.Is(err, store.ErrDuplicate) {
				return false, err
			}
			return true, nil
		}
		gen := sb.LastGeneration + 1
		ev := events.Event{
			EventID: EventID(sb.SandboxID, gen), SandboxID: sb.SandboxID, Type: events.Killed, KillReason: events.KillUnknown,
			Generation: gen, OccurredAtMs: now.UnixMilli(), ImageARN: sb.ImageARN, ExecutionID: sb.ExecutionID,
		}
		next, reason := forwarder.Next(sb, ev, now)
		if reason != "" {
			return false, nil
		}
		_, err := r.Store.PutSandbox(ctx, sb, next)
		if errors.Is(err, store.ErrConflict) {
			if sb, err = r.Store.GetSandbox(ctx, sb.SandboxID); err != nil {
				return false, err
			}
			continue
		}
		if err != nil {
			return false, err
		}
		if err := r.Store.PutEvent(ctx, ev); err != nil && !errors.Is(err, store.ErrDuplicate) {
			return false, err
		}
		return true, nil
	}
	return false, store.ErrConflict
}
