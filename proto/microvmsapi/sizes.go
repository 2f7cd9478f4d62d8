package microvmsapi

import (
	"slices"
	"strconv"
	"strings"
)

// A microVM's memory is a property of its image, so a template comes in
// one image per size, named <template>-<size>: mytemplate-512mb,
// mytemplate-1gb, mytemplate-2gb, mytemplate-4gb, mytemplate-8gb. The SDK
// names sized images this way on AWS and on the local platform, which
// sizes its sandboxes from the name.

// SizeSuffix is the image-name suffix of a size of MemorySizesMiB: 512mb,
// 1gb, 2gb, 4gb or 8gb ("" for any other value).
func SizeSuffix(mib int) string {
	if !slices.Contains(MemorySizesMiB, mib) {
		return ""
	}
	if mib < 1024 {
		return strconv.Itoa(mib) + "mb"
	}
	return strconv.Itoa(mib/1024) + "gb"
}

// SplitSizedName splits "<base>-<size>" into base and the size in MiB; ok
// is false when name does not end in a size suffix after a non-empty base.
func SplitSizedName(name string) (base string, mib int, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, false
	}
	for _, s := range MemorySizesMiB {
		if name[i+1:] == SizeSuffix(s) {
			return name[:i], s, true
		}
	}
	return "", 0, false
}
