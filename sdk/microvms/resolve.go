package microvms

import (
	"context"
	"regexp"
	"strings"
)

// imageNameRE is the service's rule for an image name.
var imageNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// IsImageARN reports whether s has the form of a MicroVM image ARN
// (arn:<partition>:lambda:<region>:<account>:microvm-image:<name>).
func IsImageARN(s string) bool {
	parts := strings.SplitN(s, ":", 7)
	return len(parts) == 7 && parts[0] == "arn" && parts[1] != "" && parts[2] == "lambda" &&
		parts[3] != "" && parts[4] != "" && parts[5] == "microvm-image" && imageNameRE.MatchString(parts[6])
}

// ResolveImageARN returns the ARN of the image nameOrARN names in the
// caller's account and region: an ARN is returned as it is (RunMicrovm
// takes only ARNs), a name is looked up with ListMicrovmImages's name
// filter and must match one image exactly. An unknown name is an
// [*APIError] of [KindNotFound]; something that is neither an ARN nor a
// valid name is [KindInvalidArgument], refused before any call.
func (c *Client) ResolveImageARN(ctx context.Context, nameOrARN string) (string, error) {
	const op = OpListMicrovmImages
	if strings.HasPrefix(nameOrARN, "arn:") {
		if !IsImageARN(nameOrARN) {
			return "", invalid(op, "not a MicroVM image ARN (arn:aws:lambda:REGION:ACCOUNT:microvm-image:NAME)")
		}
		return nameOrARN, nil
	}
	if !imageNameRE.MatchString(nameOrARN) {
		return "", invalid(op, "an image name is 1 to 64 letters, digits, '-' or '_'")
	}
	for img, err := range c.ListAllMicrovmImages(ctx, ListImagesInput{NameFilter: nameOrARN}) {
		if err != nil {
			return "", err
		}
		if img.Name == nameOrARN && IsImageARN(img.ImageArn) {
			return img.ImageArn, nil
		}
	}
	return "", &APIError{Kind: KindNotFound, Operation: string(op), Reason: "no image of that name in this account and region"}
}
