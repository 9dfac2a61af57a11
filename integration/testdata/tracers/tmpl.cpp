// The tracee of TestReportNames: functions whose C++ names carry
// template arguments, nested and with operators.
#include <cstdio>
#include <map>
#include <utility>

template <typename T> struct Box {
	T v;
	__attribute__((noinline)) T get() const { return v; }
	__attribute__((noinline)) bool operator<(const Box &o) const { return v < o.v; }
};

template <typename K, typename V>
__attribute__((noinline)) V lookup(const std::map<K, V> &m, const K &k)
{
	auto it = m.find(k);
	return it == m.end() ? V() : it->second;
}

int main()
{
	Box<std::pair<int, long>> a{{1, 2}}, b{{3, 4}};
	std::map<int, Box<int>> m{{1, Box<int>{7}}};
	int r = lookup(m, 1).get() + (a < b) + a.get().first;
	std::printf("%d\n", r);
	return 0;
}
