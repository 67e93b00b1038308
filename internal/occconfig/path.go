package occconfig

import (
	"regexp"
	"strconv"
	"strings"
)

// Path addresses a value inside a document: object keys and array indexes.
type Path []Step

// Step is one key (Index < 0) or one array index.
type Step struct {
	Key   string
	Index int
}

// Key returns a new path extended by an object key.
func (p Path) Key(k string) Path {
	out := make(Path, len(p), len(p)+1)
	copy(out, p)
	return append(out, Step{Key: k, Index: -1})
}

// Index returns a new path extended by an array index.
func (p Path) Index(i int) Path {
	out := make(Path, len(p), len(p)+1)
	copy(out, p)
	return append(out, Step{Index: i})
}

// Keys builds a path of object keys.
func Keys(keys ...string) Path {
	var p Path
	for _, k := range keys {
		p = p.Key(k)
	}
	return p
}

var identRe = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// String renders the path as it would be written in JavaScript:
// agents.defaults.models["openai/gpt-5"].agentRuntime.
func (p Path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.Index >= 0:
			b.WriteString("[" + strconv.Itoa(s.Index) + "]")
		case identRe.MatchString(s.Key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Key)
		default:
			b.WriteString("[" + strconv.Quote(s.Key) + "]")
		}
	}
	return b.String()
}

// Lookup returns the value at path and whether it exists.
func Lookup(v any, p Path) (any, bool) {
	cur := v
	for _, s := range p {
		if d, ok := cur.(Document); ok {
			cur = map[string]any(d)
		}
		if s.Index >= 0 {
			arr, ok := cur.([]any)
			if !ok || s.Index >= len(arr) {
				return nil, false
			}
			cur = arr[s.Index]
			continue
		}
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = obj[s.Key]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// Object returns the object at path, or nil when absent or not an object.
func Object(v any, p Path) map[string]any {
	got, _ := Lookup(v, p)
	if d, ok := got.(Document); ok {
		return d
	}
	m, _ := got.(map[string]any)
	return m
}

// String returns the string at path and whether a string is there.
func String(v any, p Path) (string, bool) {
	got, _ := Lookup(v, p)
	s, ok := got.(string)
	return s, ok
}

// Set writes value at path, creating intermediate objects. It refuses to
// descend through a non-object and reports false then.
func Set(d Document, p Path, value any) bool {
	if len(p) == 0 {
		return false
	}
	cur := map[string]any(d)
	for _, s := range p[:len(p)-1] {
		if s.Index >= 0 {
			return false
		}
		next, ok := cur[s.Key]
		if !ok {
			m := map[string]any{}
			cur[s.Key] = m
			cur = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return false
		}
		cur = m
	}
	last := p[len(p)-1]
	if last.Index >= 0 {
		return false
	}
	cur[last.Key] = value
	return true
}

// Delete removes the key at path if present.
func Delete(d Document, p Path) {
	if len(p) == 0 {
		return
	}
	parent := Object(map[string]any(d), p[:len(p)-1])
	if parent != nil {
		delete(parent, p[len(p)-1].Key)
	}
}
