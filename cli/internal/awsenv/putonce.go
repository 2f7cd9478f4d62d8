package awsenv

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Object is what PutOnce writes: a body of Size bytes whose sha256 is
// SHA256 (hex).
type Object struct {
	Body        io.Reader
	Size        int64
	SHA256      string
	ContentType string
}

// PutOnce puts obj at key unless an object is there already, and reports
// whether it uploaded: for keys named after their content (a sha256), so
// the object found there is this one. The write is conditional
// (If-None-Match: *: two uploads racing on one key cannot replace each
// other's object; the loser is not an error) and carries the sha256 for
// S3 to verify. Without s3:ListBucket a missing key answers HeadObject
// with 403, not 404: the conditional write settles it. forbidden, when
// not empty, is added to a refusal's message (which policy grants the
// write). Errors are *S3Error (no AWS message) or ctx's.
func PutOnce(ctx context.Context, c *s3.Client, bucket, key string, obj Object, forbidden string) (bool, error) {
	_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err == nil {
		return false, nil
	}
	herr := SanitizeS3("HeadObject", err)
	var se *S3Error
	if !errors.As(herr, &se) || !se.NotFound() && !se.Forbidden() {
		return false, s3Failure(bucket, herr, forbidden)
	}
	sum, err := hex.DecodeString(obj.SHA256)
	if err != nil || len(sum) != 32 {
		return false, fmt.Errorf("awsenv: PutOnce needs the body's sha256 in hex")
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(bucket),
		Key:            aws.String(key),
		Body:           obj.Body,
		ContentLength:  aws.Int64(obj.Size),
		ContentType:    aws.String(obj.ContentType),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum)),
		IfNoneMatch:    aws.String("*"),
	})
	if err == nil {
		return true, nil
	}
	perr := SanitizeS3("PutObject", err)
	if errors.As(perr, &se) && se.PreconditionFailed() {
		return false, nil // someone else put the same content first
	}
	return false, s3Failure(bucket, perr, forbidden)
}

// s3Failure adds what to check to a missing bucket or a refusal.
func s3Failure(bucket string, err error, forbidden string) error {
	var se *S3Error
	if errors.As(err, &se) {
		switch {
		case se.Code == "NoSuchBucket":
			return fmt.Errorf("%w: bucket %s does not exist (check --bucket and the region)", err, bucket)
		case se.Forbidden():
			msg := fmt.Sprintf("%%w: these credentials may not write to bucket %s", bucket)
			if forbidden != "" {
				msg += " (" + forbidden + ")"
			}
			return fmt.Errorf(msg, err)
		}
	}
	return err
}
