package files

import (
	"errors"
	"time"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/transfer"
)

// transferManager returns the manager, or Unimplemented without one.
func (s *Service) transferManager() (*transfer.Manager, error) {
	if s.transfers == nil {
		return nil, notBuilt("S3 transfers (FilesystemService.StartImport and friends)")
	}
	return s.transfers, nil
}

func signed(p *raydv1.PresignedRequest) transfer.Signed {
	return transfer.Signed{URL: p.GetUrl(), Headers: p.GetHeaders()}
}

func object(o *raydv1.S3Object) transfer.Object {
	return transfer.Object{Bucket: o.GetBucket(), Key: o.GetKey(), Region: o.GetRegion()}
}

// transferError maps a transfer call's refusal: the URL and request
// checks carry fixed messages (they name a rule, never a value).
func transferError(err error) error {
	switch {
	case errors.Is(err, transfer.ErrBadURL), errors.Is(err, transfer.ErrInvalid):
		return rpcerr.Invalid(err.Error())
	case errors.Is(err, transfer.ErrWrongRegion):
		return rpcerr.Invalid("the URL is signed for another region than the object's")
	case errors.Is(err, transfer.ErrTooMany):
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many transfers: at most 16 wait or run at once")
	case errors.Is(err, transfer.ErrNotFound):
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such transfer (an ended one is kept 30 minutes)")
	}
	return rpcerr.From(err)
}

var phases = map[transfer.Phase]raydv1.TransferPhase{
	transfer.Waiting:   raydv1.TransferPhase_TRANSFER_PHASE_WAITING,
	transfer.Running:   raydv1.TransferPhase_TRANSFER_PHASE_RUNNING,
	transfer.Done:      raydv1.TransferPhase_TRANSFER_PHASE_DONE,
	transfer.Failed:    raydv1.TransferPhase_TRANSFER_PHASE_FAILED,
	transfer.Cancelled: raydv1.TransferPhase_TRANSFER_PHASE_CANCELLED,
}

// transferState renders a state.
func transferState(st transfer.State) *raydv1.TransferState {
	out := &raydv1.TransferState{
		TransferId: st.ID, Phase: phases[st.Phase], BytesDone: st.BytesDone, BytesTotal: st.BytesTotal,
		Probes: st.Probes, Sha256: st.SHA256, PartEtags: st.PartETags, DurationMs: uint64(st.Duration / time.Millisecond),
		Direction: raydv1.TransferDirection_TRANSFER_DIRECTION_IMPORT,
	}
	if st.Direction == transfer.Down {
		out.Direction = raydv1.TransferDirection_TRANSFER_DIRECTION_EXPORT
	}
	if st.Entry != nil {
		out.Entry = entryInfo(*st.Entry)
	}
	if st.Code != "" {
		out.Error = &raydv1.StreamError{Code: st.Code, Message: st.Message}
	}
	return out
}
