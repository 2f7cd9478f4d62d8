package microvmsapi

import "testing"

func TestSizedNames(t *testing.T) {
	for _, mib := range MemorySizesMiB {
		name := "web-" + SizeSuffix(mib)
		base, got, ok := SplitSizedName(name)
		if !ok || base != "web" || got != mib {
			t.Errorf("%s: %q %d %v", name, base, got, ok)
		}
	}
	for _, name := range []string{"web", "-2gb", "web-3gb", "web-2GB", "web2gb", "web-2gb-x", "web-1024mb"} {
		if _, _, ok := SplitSizedName(name); ok {
			t.Errorf("%s split", name)
		}
	}
	if SizeSuffix(1000) != "" || SizeSuffix(512) != "512mb" || SizeSuffix(8192) != "8gb" {
		t.Error("suffixes")
	}
}
