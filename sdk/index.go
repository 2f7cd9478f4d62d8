package rayito

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/sdk/internal/backoff"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// The metadata index (security model T19, docs/index.md): a DynamoDB
// table of the user's account (infra/metadata-index.yaml) holding one row
// per sandbox created WithIndex: its id (pk), image ARN and version, start
// (ms), metadata, the SDK's version and a TTL (expires_at). Never the
// access token or its hash, envs, secrets, the run payload or a JWE.
//
// List WithIndex reads the rows of each ListMicrovms page with one
// BatchGetItem: the state always comes from ListMicrovms, and a row counts
// only when its image ARN is the listing's and its start within a second
// of the listing's, so a forged row never creates a sandbox and never
// changes a state. Metadata filters are answered from the rows, so paused
// sandboxes are found without waking them.

// IndexWriteFailure is what Create does when the index row cannot be
// written.
type IndexWriteFailure int

const (
	// IndexTerminate (the default) terminates the new sandbox and returns
	// an error matching ErrIndexWrite: no sandbox runs unlisted.
	IndexTerminate IndexWriteFailure = iota
	// IndexWarn logs a warning through WithLogger's logger (no values)
	// and returns the sandbox.
	IndexWarn
)

// DefaultIndexTTLMargin is DynamoDbIndex.TTLMargin's default.
const DefaultIndexTTLMargin = time.Hour

// DynamoDbIndex names the metadata index table (the metadata-index stack's
// TableName output). The calls go with the caller's AWS configuration
// (WithAWSConfig, else the default chain), whichever the backend; its
// BaseEndpoint, when set, is honoured (DynamoDB Local, dynalite), and
// Endpoint overrides it for the index alone.
type DynamoDbIndex struct {
	// Table is the table's name.
	Table string
	// OnWriteFailure is IndexTerminate (default) or IndexWarn.
	OnWriteFailure IndexWriteFailure
	// TTLMargin is how long after the sandbox's maximum lifetime its row
	// expires (DynamoDB TTL on expires_at); default 1 h.
	TTLMargin time.Duration
	// Endpoint, when set, is the DynamoDB endpoint URL of the index,
	// instead of the AWS configuration's.
	Endpoint string
}

// ErrIndexWrite: Create could not write the sandbox's index row (with
// IndexTerminate, the sandbox was terminated).
var ErrIndexWrite = errors.New("rayito: metadata index write failed")

// errIndexRow: a row of the index is not one this SDK writes (List
// ignores such rows; parseIndexRow returns it).
var errIndexRow = errors.New("rayito: malformed metadata index row")

// WithIndex makes Create write each new sandbox's row to the metadata
// index, and List read the rows (see DynamoDbIndex).
func WithIndex(idx DynamoDbIndex) Option {
	return sandboxOption(func(c *config) { c.index = &idx })
}

// Index row attributes.
const (
	idxPK         = "pk"
	idxImageARN   = "image_arn"
	idxImageVer   = "image_version"
	idxStartedAt  = "started_at"
	idxMetadata   = "metadata"
	idxSDKVersion = "sdk_version"
	idxExpiresAt  = "expires_at"
)

// Index limits: BatchGetItem takes at most 100 keys; unprocessed keys are
// retried this many times with a doubling backoff.
const (
	idxBatchMax       = 100
	idxBatchAttempts  = 8
	idxFirstBackoff   = 50 * time.Millisecond
	idxMaxBackoff     = 2 * time.Second
	idxStartTolerance = time.Second
	idxMaxARNLen      = 2048
)

// indexRow is one parsed row.
type indexRow struct {
	ID        string
	ImageARN  string
	StartedAt time.Time
	Metadata  map[string]string
}

// indexDB is the part of the DynamoDB client the index uses.
type indexDB interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// indexClient is one call's DynamoDB client of the index.
type indexClient struct {
	db  indexDB
	idx DynamoDbIndex
}

// checkIndex checks WithIndex's settings (nil: no index), before any
// call.
func (c *config) checkIndex() error {
	if c.index == nil {
		return nil
	}
	idx := c.index
	if !validTableName(idx.Table) {
		return newError(ReasonInvalidArgument, "invalid metadata index table name (3 to 255 of A-Z a-z 0-9 _ . -)")
	}
	if idx.OnWriteFailure != IndexTerminate && idx.OnWriteFailure != IndexWarn {
		return newError(ReasonInvalidArgument, "the metadata index's OnWriteFailure must be IndexTerminate or IndexWarn")
	}
	if idx.TTLMargin < 0 || idx.TTLMargin > 24*time.Hour*365 {
		return newError(ReasonInvalidArgument, "the metadata index's TTLMargin must be between 0 and a year")
	}
	if idx.Endpoint != "" && !(strings.HasPrefix(idx.Endpoint, "https://") || strings.HasPrefix(idx.Endpoint, "http://")) {
		return newError(ReasonInvalidArgument, "the metadata index's Endpoint must be an http(s) URL")
	}
	return nil
}

func newIndexClient(ctx context.Context, cfg *config) (*indexClient, error) {
	if err := cfg.checkIndex(); err != nil {
		return nil, err
	}
	idx := *cfg.index
	if idx.TTLMargin == 0 {
		idx.TTLMargin = DefaultIndexTTLMargin
	}
	awsCfg, err := cfg.callerAWSConfig(ctx)
	if err != nil {
		return nil, err
	}
	var opts []func(*dynamodb.Options)
	if idx.Endpoint != "" {
		opts = append(opts, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(idx.Endpoint) })
	}
	return &indexClient{db: dynamodb.NewFromConfig(awsCfg, opts...), idx: idx}, nil
}

// indexErr maps a DynamoDB error of the index.
func indexErr(op, policy string, err error) error {
	switch awsErrorCode(err) {
	case "ResourceNotFoundException":
		return newError(ReasonNotFound, "rayito: the metadata index table does not exist in this account and region (deploy infra/metadata-index.yaml)")
	case "AccessDeniedException":
		return newError(ReasonPermissionDenied, "rayito: dynamodb "+op+" on the metadata index was denied (the stack's "+policy+")")
	}
	return awsErr("dynamodb", op, err)
}

// indexItem is the row Create writes: never the token, its hash, envs,
// secrets or the payload.
func indexItem(vm *microvmsapi.Microvm, metadata map[string]string, maxDuration int, margin time.Duration, now time.Time) map[string]ddbtypes.AttributeValue {
	start := now
	if vm.StartedAt != nil {
		start = *vm.StartedAt
	}
	life := time.Duration(maxDuration) * time.Second
	if life <= 0 {
		life = maxLifetime
	}
	md := make(map[string]ddbtypes.AttributeValue, len(metadata))
	for k, v := range metadata {
		md[k] = ddbS(v)
	}
	item := map[string]ddbtypes.AttributeValue{
		idxPK:         ddbS(vm.MicrovmID),
		idxImageARN:   ddbS(vm.ImageArn),
		idxStartedAt:  &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(start.UnixMilli(), 10)},
		idxMetadata:   &ddbtypes.AttributeValueMemberM{Value: md},
		idxSDKVersion: ddbS(Version),
		idxExpiresAt:  &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(start.Add(life+margin).Unix(), 10)},
	}
	if vm.ImageVersion != "" {
		item[idxImageVer] = ddbS(vm.ImageVersion)
	}
	return item
}

// writeIndex writes s's row once RunMicrovm succeeded. A failure with
// IndexTerminate is an error (ErrIndexWrite), for which Create kills the
// sandbox; with IndexWarn it is a warning, without values.
func (s *Sandbox) writeIndex(ctx context.Context, vm *microvmsapi.Microvm, maxDuration int) error {
	ic, err := newIndexClient(ctx, s.cfg)
	if err == nil {
		_, err = ic.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(ic.idx.Table),
			Item:      indexItem(vm, s.cfg.metadata, maxDuration, ic.idx.TTLMargin, time.Now()),
		})
		if err != nil {
			err = indexErr("PutItem", "RayitoIndexWriter", err)
		}
	}
	if err == nil {
		return nil
	}
	if s.cfg.index.OnWriteFailure == IndexWarn {
		s.cfg.logger.Warn("rayito: the sandbox's metadata index row was not written; indexed listings will not show it",
			"sandbox_id", s.id, "reason", string(ReasonOf(err)))
		return nil
	}
	return newError(ReasonOf(err), "sandbox "+s.id+": its metadata index row could not be written, so it was terminated: "+err.Error(), ErrIndexWrite, err)
}

// parseIndexRow reads a row (untrusted: anyone who can write the table
// writes rows). Anything that is not shaped like the rows Create writes
// is errIndexRow.
func parseIndexRow(item map[string]ddbtypes.AttributeValue) (indexRow, error) {
	var r indexRow
	bad := func(what string) (indexRow, error) {
		return indexRow{}, fmt.Errorf("%w: %s", errIndexRow, what)
	}
	pk, ok := item[idxPK].(*ddbtypes.AttributeValueMemberS)
	if !ok || !validSandboxID(pk.Value) {
		return bad("pk")
	}
	r.ID = pk.Value
	arn, ok := item[idxImageARN].(*ddbtypes.AttributeValueMemberS)
	if !ok || arn.Value == "" || len(arn.Value) > idxMaxARNLen || !utf8.ValidString(arn.Value) {
		return bad("image_arn")
	}
	r.ImageARN = arn.Value
	st, ok := item[idxStartedAt].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return bad("started_at")
	}
	ms, err := strconv.ParseInt(st.Value, 10, 64)
	if err != nil || ms <= 0 || ms > 1<<53 {
		return bad("started_at")
	}
	r.StartedAt = time.UnixMilli(ms)
	if raw, present := item[idxMetadata]; present {
		m, ok := raw.(*ddbtypes.AttributeValueMemberM)
		if !ok || len(m.Value) > runpayload.MaxMetadata {
			return bad("metadata")
		}
		r.Metadata = make(map[string]string, len(m.Value))
		for k, v := range m.Value {
			sv, ok := v.(*ddbtypes.AttributeValueMemberS)
			if !ok || k == "" || len(k) > runpayload.MaxMetaKeyLen || len(sv.Value) > runpayload.MaxMetaValueLen ||
				!utf8.ValidString(k) || !utf8.ValidString(sv.Value) {
				return bad("metadata")
			}
			r.Metadata[k] = sv.Value
		}
	}
	return r, nil
}

// validSandboxID is a microVM id's shape as far as the index cares:
// printable ASCII of reasonable length.
func validSandboxID(id string) bool { return len(id) <= 256 && printableASCII(id) }

// verified reports whether row describes item: the same id and image,
// and a start within a second of the listing's.
func (r indexRow) verified(item microvmsapi.MicrovmSummary) bool {
	if r.ID != item.MicrovmID || r.ImageARN != item.ImageArn || item.StartedAt == nil {
		return false
	}
	d := r.StartedAt.Sub(*item.StartedAt)
	return d <= idxStartTolerance && d >= -idxStartTolerance
}

// getRows reads the rows of ids (at most 100 a request), retrying
// unprocessed keys with a doubling backoff. Rows that do not parse are
// left out.
func (ic *indexClient) getRows(ctx context.Context, ids []string) (map[string]indexRow, error) {
	out := make(map[string]indexRow, len(ids))
	for start := 0; start < len(ids); start += idxBatchMax {
		chunk := ids[start:min(start+idxBatchMax, len(ids))]
		keys := make([]map[string]ddbtypes.AttributeValue, 0, len(chunk))
		seen := map[string]bool{}
		for _, id := range chunk {
			if !seen[id] {
				seen[id] = true
				keys = append(keys, map[string]ddbtypes.AttributeValue{idxPK: ddbS(id)})
			}
		}
		req := map[string]ddbtypes.KeysAndAttributes{ic.idx.Table: {Keys: keys, ConsistentRead: aws.Bool(false)}}
		retry := backoff.New(idxFirstBackoff, idxMaxBackoff)
		for attempt := 0; ; attempt++ {
			resp, err := ic.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, indexErr("BatchGetItem", "RayitoIndexReader", err)
			}
			for _, item := range resp.Responses[ic.idx.Table] {
				if r, err := parseIndexRow(item); err == nil && seen[r.ID] {
					out[r.ID] = r
				}
			}
			left, ok := resp.UnprocessedKeys[ic.idx.Table]
			if !ok || len(left.Keys) == 0 {
				break
			}
			if attempt+1 >= idxBatchAttempts {
				return nil, newError(ReasonRateLimited, "rayito: dynamodb BatchGetItem left keys of the metadata index unprocessed after retries")
			}
			if err := retry.Wait(ctx); err != nil {
				return nil, err
			}
			req = map[string]ddbtypes.KeysAndAttributes{ic.idx.Table: left}
		}
	}
	return out, nil
}

// listedItem is one sandbox of a listing, with its verified index row's
// metadata when List reads the index.
type listedItem struct {
	microvmsapi.MicrovmSummary
	// indexed: a verified row was found; metadata is its metadata.
	indexed  bool
	metadata map[string]string
}

// listItems lists the sandboxes page by page. Without an index it is
// ListAll's; with one, each page's rows come from one BatchGetItem and
// are verified against the page (see indexRow.verified).
func listItems(ctx context.Context, cfg *config, mv *microvms.Client) iter.Seq2[listedItem, error] {
	if cfg.index == nil {
		return func(yield func(listedItem, error) bool) {
			for it, err := range mv.ListAll(ctx, microvms.ListInput{}) {
				if !yield(listedItem{MicrovmSummary: it}, err) {
					return
				}
			}
		}
	}
	return func(yield func(listedItem, error) bool) {
		ic, err := newIndexClient(ctx, cfg)
		if err != nil {
			yield(listedItem{}, err)
			return
		}
		var page microvms.ListInput
		for {
			out, err := mv.ListMicrovms(ctx, page)
			if err != nil {
				yield(listedItem{}, err) // List maps it
				return
			}
			ids := make([]string, 0, len(out.Items))
			for _, it := range out.Items {
				ids = append(ids, it.MicrovmID)
			}
			rows, err := ic.getRows(ctx, ids)
			if err != nil {
				yield(listedItem{}, err)
				return
			}
			for _, it := range out.Items {
				li := listedItem{MicrovmSummary: it}
				if r, ok := rows[it.MicrovmID]; ok && r.verified(it) {
					li.indexed, li.metadata = true, maps.Clone(r.Metadata)
				}
				if !yield(li, nil) {
					return
				}
			}
			if out.NextToken == "" {
				return
			}
			if out.NextToken == page.NextToken {
				yield(listedItem{}, newError(ReasonInternal, "rayito: the sandbox platform returned the same listing page token again"))
				return
			}
			page.NextToken = out.NextToken
		}
	}
}
