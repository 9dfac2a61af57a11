package output

import "testing"

func TestElideTemplates(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"main", "main"},
		{"std::vector<int, std::allocator<int> >::push_back", "std::vector<...>::push_back"},
		{"std::map<int, std::string>::find", "std::map<...>::find"},
		{"Box<std::pair<int, long> >::operator<", "Box<...>::operator<"},
		{"Box<int>::operator<<", "Box<...>::operator<<"},
		{"operator<=><int>", "operator<=><...>"},
		{"std::unique_ptr<T>::operator->", "std::unique_ptr<...>::operator->"},
		{"lookup<int, Box<int> >", "lookup<...>"},
		{"broken<int", "broken<int"},
	} {
		if got := ElideTemplates(c.in); got != c.want {
			t.Errorf("ElideTemplates(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
