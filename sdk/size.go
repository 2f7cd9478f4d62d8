package rayito

import (
	"fmt"
	"strings"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// Sizes. A microVM's memory is a property of its image
// (resources.minimumMemoryInMiB: 512, 1024, 2048, 4096 or 8192 MiB), so a
// template comes in one image per size, named <template>-<size>:
// mytemplate-512mb, mytemplate-1gb, mytemplate-2gb, mytemplate-4gb,
// mytemplate-8gb.

// MaxSizeMiB is the largest size (8 GiB).
const MaxSizeMiB = 8192

// WithMemory asks Create for a sandbox of mib MiB of memory. The sizes are
// 512, 1024, 2048, 4096 and 8192; any other value up to 8192 rounds up to
// the next one, with a warning through WithLogger's logger, and a value
// above 8192 (or below 1) is ErrInvalidArgument. On AWS the template must
// then be an image name, and the image that runs is the one of that size
// (SizedTemplateName: WithTemplate("mytemplate"), WithMemory(2048) runs the
// image mytemplate-2gb); an image ARN names one size already and is
// refused. The root local platform sizes its sandboxes from the same names
// (local-4gb, mytemplate-512mb: the memory limit, and the tmpfs bounds that
// follow from it); one without root refuses sizes.
func WithMemory(mib int) Option { return sandboxOption(func(c *config) { c.sizeMiB = mib }) }

// RoundSize returns the size mib rounds up to (512, 1024, 2048, 4096 or
// 8192), or ErrInvalidArgument for a value below 1 or above 8192.
func RoundSize(mib int) (int, error) {
	if mib < 1 || mib > MaxSizeMiB {
		return 0, newError(ReasonInvalidArgument, fmt.Sprintf("size %d MiB: want 1 to %d (rounded up to 512, 1024, 2048, 4096 or 8192)", mib, MaxSizeMiB))
	}
	for _, s := range microvmsapi.MemorySizesMiB {
		if s >= mib {
			return s, nil
		}
	}
	return MaxSizeMiB, nil
}

// SizeSuffix is the image-name suffix of a size: 512mb, 1gb, 2gb, 4gb or
// 8gb ("" for a size that is not one of the five).
func SizeSuffix(mib int) string { return microvmsapi.SizeSuffix(mib) }

// SizedTemplateName is the name of template's image of mib MiB
// (rounded up as WithMemory does): "<template>-<size>", e.g.
// SizedTemplateName("mytemplate", 2048) is "mytemplate-2gb". An image ARN,
// or a result that is not a valid image name ([A-Za-z0-9_-], at most 64),
// is ErrInvalidArgument.
func SizedTemplateName(template string, mib int) (string, error) {
	size, err := RoundSize(mib)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(template, "arn:") {
		return "", newError(ReasonInvalidArgument, "an image ARN names one size already: pass the template's name with a size")
	}
	name := template + "-" + SizeSuffix(size)
	if !validImageName(template) || !validImageName(name) {
		return "", newError(ReasonInvalidArgument, "the sized template name must be an image name (letters, digits, '-', '_'; at most 64 with its size suffix)")
	}
	return name, nil
}

// validImageName is CreateMicrovmImage's rule for names.
func validImageName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// sizedTemplate applies WithMemory to Create's template (see WithMemory).
func sizedTemplate(cfg *config, template string) (string, error) {
	size, err := RoundSize(cfg.sizeMiB)
	if err != nil {
		return "", err
	}
	name, err := SizedTemplateName(template, size)
	if err != nil {
		return "", err
	}
	if size != cfg.sizeMiB {
		cfg.logger.Warn("rayito: the sandbox size was rounded up to the next size there is",
			"requested_mib", cfg.sizeMiB, "size_mib", size)
	}
	return name, nil
}
