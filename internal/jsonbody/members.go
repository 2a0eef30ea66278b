package jsonbody

// members are an object's members in the order written, each name with its
// JSON text. A request body has a handful, so finding one is a scan of a
// few strings, cheaper than hashing them into a map; past indexFrom members
// an index takes over, so that a body of many members (a hostile one, up to
// the body limit) costs no scan per member.
type members struct {
	list  []member
	index map[string]int // nil until the list outgrows indexFrom
}

type member struct{ name, raw string }

// indexFrom is the number of members from which names are looked up in an
// index rather than by a scan.
const indexFrom = 16

// get returns the JSON text of member name.
func (m *members) get(name string) (string, bool) {
	if m.index != nil {
		i, ok := m.index[name]
		if !ok {
			return "", false
		}
		return m.list[i].raw, true
	}
	for i := range m.list {
		if m.list[i].name == name {
			return m.list[i].raw, true
		}
	}
	return "", false
}

// add appends a member, unless one of that name is already there: then it
// reports false and changes nothing.
func (m *members) add(name, raw string) bool {
	if _, dup := m.get(name); dup {
		return false
	}
	m.list = append(m.list, member{name, raw})
	switch {
	case m.index != nil:
		m.index[name] = len(m.list) - 1
	case len(m.list) == indexFrom:
		m.index = make(map[string]int, 2*indexFrom)
		for i, mem := range m.list {
			m.index[mem.name] = i
		}
	}
	return true
}
