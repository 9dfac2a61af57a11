package symbols

import "testing"

func TestDisplayName(t *testing.T) {
	tests := []struct{ name, want string }{
		// C++
		{"_ZN2ns7Thrower5throwEi", "ns::Thrower::throw"},
		{"_Z7throweri", "thrower"},
		{"_Z4workv", "work"},
		{"_Z3maxIiET_S0_S0_", "max<int>"},
		{"_ZNKSt6vectorIiSaIiEE4sizeEv", "std::vector<int, std::allocator<int> >::size"},
		{"_ZN1AC2Ev", "A::A"},
		{"_ZN1AD1Ev", "A::~A"},
		{"_ZN1AplERKS_", "A::operator+"},
		{"_ZZ4mainE1x", "main::x"},
		{"_ZTV3Foo", "vtable for Foo"},
		// Clones and versions are kept.
		{"_Z7throweri.cold", "thrower.cold"},
		{"_ZN2ns1fEi.isra.0", "ns::f.isra.0"},
		{"_ZN2ns1fEi.constprop.0.isra.0", "ns::f.constprop.0.isra.0"},
		{"_ZNSt9exceptionD2Ev@GLIBCXX_3.4", "std::exception::~exception@GLIBCXX_3.4"},
		// Rust, legacy mangling: the hash goes.
		{"_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"},
		// Not mangled: unchanged.
		{"main", "main"},
		{"work", "work"},
		{"_start", "_start"},
		{"__libc_start_main", "__libc_start_main"},
		{"malloc@GLIBC_2.2.5", "malloc@GLIBC_2.2.5"},
		{"helper.cold", "helper.cold"},
		{"main.work", "main.work"},
		{"runtime.gcBgMarkWorker.func1", "runtime.gcBgMarkWorker.func1"},
		{"type:.eq.[2]interface {}", "type:.eq.[2]interface {}"},
		{"_Zfoo", "_Zfoo"},
		{"_Z", "_Z"},
		{"_Rfoo", "_Rfoo"},
		{"_GLOBAL__sub_I_main", "_GLOBAL__sub_I_main"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := DisplayName(tt.name); got != tt.want {
			t.Errorf("DisplayName(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
