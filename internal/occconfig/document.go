// Package occconfig parses, normalises and addresses native OpenClaw
// configuration documents. It is pure: values in, values or errors out.
package occconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/titanous/json5"
)

// Document is a parsed native configuration: the root JSON object with
// numbers normalised (int64, float64 or json.Number for integers outside
// int64), so that two spellings of the same value compare equal.
type Document map[string]any

// SyntaxError reports a document that is not JSON or JSON5, with the
// 1-based line and column of the fault.
type SyntaxError struct {
	Line, Column int
	Msg          string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// ValueError reports a value the canonical form cannot hold (NaN,
// Infinity) or a root that is not an object, at a document path.
type ValueError struct {
	Path Path
	Msg  string
}

func (e *ValueError) Error() string {
	if len(e.Path) == 0 {
		return e.Msg
	}
	return e.Path.String() + ": " + e.Msg
}

// Limits on a document, so that hostile or accidental input (a document of
// gigabytes, or a hundred thousand nested brackets, which would exhaust the
// decoder's stack and the provider's memory) is refused with an error before
// it is decoded.
const (
	// MaxDocumentBytes is the largest document Parse reads, in bytes of its
	// source text, and the largest canonical form (Canonical) it returns, so
	// that every canonical form it returns parses again.
	MaxDocumentBytes = 1 << 20 // 1 MiB
	// MaxDocumentDepth is how deeply objects and arrays may nest; the root
	// object is level 1, so {"a": {"b": []}} nests 3 levels.
	MaxDocumentDepth = 64
)

// canonicalGrowth bounds how many bytes of canonical JSON one byte of source
// becomes: the most is under 5 ("1e20," is written in 22 bytes; an invalid
// UTF-8 byte becomes U+FFFD, 3; an unquoted key gains its quotes). Below
// MaxDocumentBytes/canonicalGrowth the canonical form cannot exceed the limit
// and is not measured.
const canonicalGrowth = 6

// Parse reads a JSON or JSON5 document whose root must be an object. It
// refuses a document larger than MaxDocumentBytes or nested deeper than
// MaxDocumentDepth.
func Parse(src string) (Document, error) {
	if len(src) > MaxDocumentBytes {
		return nil, &ValueError{Msg: fmt.Sprintf("the configuration document is %s; the limit is %s; make it smaller",
			byteSize(len(src)), byteSize(MaxDocumentBytes))}
	}
	if strings.TrimSpace(src) == "" {
		return nil, &ValueError{Msg: "the document is empty; write a JSON or JSON5 object such as {}"}
	}
	// The decoder recurses once per level of nesting: the depth is checked on
	// the text first.
	if at, deep := nesting(src, MaxDocumentDepth); deep {
		return nil, tooDeep(at)
	}
	r := strings.NewReader(src)
	dec := json5.NewDecoder(r)
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, syntaxError(src, err)
	}
	// The decoder reads ahead in chunks: what follows the root object is its
	// buffer plus whatever it has not read yet.
	buffered, _ := io.ReadAll(dec.Buffered())
	consumed := len(src) - r.Len() - len(buffered)
	if i := firstContent(src[consumed:]); i >= 0 {
		line, col := position(src, consumed+i)
		return nil, &SyntaxError{Line: line, Column: col, Msg: "unexpected content after the root object"}
	}
	root, ok := raw.(map[string]any)
	if !ok {
		return nil, &ValueError{Msg: fmt.Sprintf("the root must be an object, not %s", kind(raw))}
	}
	norm, err := normalise(root, nil)
	if err != nil {
		return nil, err
	}
	doc := Document(norm.(map[string]any))
	if len(src) > MaxDocumentBytes/canonicalGrowth {
		if n := len(Canonical(doc)); n > MaxDocumentBytes {
			return nil, &ValueError{Msg: fmt.Sprintf("the configuration document is %s in canonical JSON; the limit is %s; make it smaller",
				byteSize(n), byteSize(MaxDocumentBytes))}
		}
	}
	return doc, nil
}

// byteSize is a size as people read it, with the exact count of bytes
// when it is not a whole number of KiB or MiB: "1 MiB", "2.3 MiB (2411725 bytes)".
func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// tooDeep is the error for a container nested deeper than MaxDocumentDepth
// at path (the path of the first such container).
func tooDeep(at Path) error {
	where := at.String()
	if len(where) > 256 {
		// Keep the start and the end of a long path; cut at rune boundaries.
		head, tail := where[:120], where[len(where)-120:]
		where = strings.ToValidUTF8(head, "") + "…" + strings.ToValidUTF8(tail, "")
	}
	return &ValueError{Msg: fmt.Sprintf("the configuration document nests deeper than %d levels at %s; flatten it", MaxDocumentDepth, where)}
}

// nesting reads the root value of src as the JSON5 decoder's scanner does
// (strings, escapes and comments by its rules, so that brackets inside them
// do not count) and reports whether an object or array in it nests deeper
// than limit, and the path of the first that does. It only counts brackets:
// the decoder reports any syntax error afterwards. It does not recurse.
func nesting(src string, limit int) (at Path, deep bool) {
	type frame struct {
		object    bool
		expectKey bool // in an object, before a key's ':'
		key       string
		index     int
	}
	var stack []frame
	started := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '"' || c == '\'':
			end := i + 1
			for end < len(src) && src[end] != c {
				if src[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(src) {
				return nil, false // unterminated: a syntax error
			}
			if !started {
				return nil, false // a scalar root: the decoder does not recurse
			}
			if top := len(stack) - 1; stack[top].object && stack[top].expectKey {
				stack[top].key = unquoteKey(src[i : end+1])
			}
			i = end
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			// A line comment ends at a line feed or a carriage return.
			for i += 2; i < len(src) && src[i] != '\n' && src[i] != '\r'; i++ {
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			// The scanner ends a block comment at the first '/' after its
			// first '*' (so "/* * / x */" ends before x).
			star := strings.IndexByte(src[i+2:], '*')
			if star < 0 {
				return nil, false
			}
			slash := strings.IndexByte(src[i+2+star+1:], '/')
			if slash < 0 {
				return nil, false
			}
			i += 2 + star + 1 + slash
		case c == '{' || c == '[':
			started = true
			if len(stack) >= limit {
				// Where each enclosing container is: the path of this one.
				at = make(Path, 0, len(stack))
				for _, f := range stack {
					if f.object {
						at = append(at, Step{Key: f.key, Index: -1})
					} else {
						at = append(at, Step{Index: f.index})
					}
				}
				return at, true
			}
			stack = append(stack, frame{object: c == '{', expectKey: c == '{'})
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return nil, false
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return nil, false // the root value ended
			}
		case c == ',' && len(stack) > 0:
			if top := &stack[len(stack)-1]; top.object {
				top.expectKey = true
			} else {
				top.index++
			}
		case c == ':' && len(stack) > 0:
			stack[len(stack)-1].expectKey = false
		case isKeyByte(c):
			if !started {
				return nil, false
			}
			end := i
			for end < len(src) && isKeyByte(src[end]) {
				end++
			}
			if top := len(stack) - 1; top >= 0 && stack[top].object && stack[top].expectKey {
				stack[top].key = src[i:end]
			}
			i = end - 1
		case c > ' ' && !started:
			return nil, false // a scalar root (a number, a sign)
		}
	}
	return nil, false
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}

// unquoteKey decodes a quoted key for an error message; the raw text when
// it does not decode.
func unquoteKey(quoted string) string {
	var s string
	if json5.Unmarshal([]byte(quoted), &s) == nil {
		return s
	}
	return quoted[1 : len(quoted)-1]
}

func syntaxError(src string, err error) error {
	var se *json5.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the bytes read up to and including the offending one.
		line, col := position(src, int(se.Offset)-1)
		return &SyntaxError{Line: line, Column: col, Msg: strings.TrimPrefix(se.Error(), "json: ")}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		line, col := position(src, len(src))
		return &SyntaxError{Line: line, Column: col, Msg: "unexpected end of document"}
	}
	return &SyntaxError{Line: 1, Column: 1, Msg: strings.TrimPrefix(err.Error(), "json: ")}
}

// firstContent returns the offset of the first byte of s that is neither
// white space nor inside a // or /* */ comment, or -1 when there is none, so
// that trailing comments after the root object are not mistaken for content.
// An unterminated /* comment is content.
func firstContent(s string) int {
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "//"):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return -1
			}
			i += end + 1
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return i
			}
			i += end + 4
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if !unicode.IsSpace(r) {
				return i
			}
			i += size
		}
	}
	return -1
}

func position(src string, off int) (line, col int) {
	if off > len(src) {
		off = len(src)
	}
	if off < 0 {
		off = 0
	}
	line = 1 + strings.Count(src[:off], "\n")
	col = off - strings.LastIndex(src[:off], "\n")
	return line, col
}

// normalise normalises the numbers in v, at path. It refuses a container
// deeper than MaxDocumentDepth (nesting has refused it in the text already;
// this keeps the recursion bounded whatever reaches it).
func normalise(v any, path Path) (any, error) {
	switch v.(type) {
	case map[string]any, []any:
		if len(path) >= MaxDocumentDepth {
			return nil, tooDeep(path)
		}
	}
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			n, err := normalise(e, path.Key(k))
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			n, err := normalise(e, path.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case json5.Number:
		return normaliseNumber(string(t), path)
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return nil, &ValueError{Path: path, Msg: "Infinity and NaN cannot be represented in JSON; use a finite number"}
		}
		return normaliseFloat(t), nil
	default:
		return v, nil
	}
}

func normaliseNumber(s string, path Path) (any, error) {
	clean := strings.TrimPrefix(s, "+")
	neg := strings.HasPrefix(clean, "-")
	digits := strings.TrimPrefix(clean, "-")
	if strings.HasPrefix(digits, "0x") || strings.HasPrefix(digits, "0X") {
		n, ok := new(big.Int).SetString(digits[2:], 16)
		if !ok {
			return nil, &ValueError{Path: path, Msg: fmt.Sprintf("invalid hexadecimal number %q", s)}
		}
		if neg {
			n.Neg(n)
		}
		return bigInt(n), nil
	}
	if !strings.ContainsAny(digits, ".eE") {
		if n, ok := new(big.Int).SetString(clean, 10); ok {
			return bigInt(n), nil
		}
	}
	f, err := strconv.ParseFloat(clean, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, &ValueError{Path: path, Msg: fmt.Sprintf("number %q is out of range", s)}
	}
	return normaliseFloat(f), nil
}

func bigInt(n *big.Int) any {
	if n.IsInt64() {
		return n.Int64()
	}
	return json.Number(n.String())
}

// normaliseFloat turns integral floats into int64 so that 1.0 and 1 are one value.
func normaliseFloat(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return "a number"
	}
}

// Canonical returns the canonical JSON form: keys sorted, no insignificant
// whitespace, no HTML escaping. Equal documents have equal canonical bytes.
func Canonical(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(plain(v)); err != nil {
		// Parse only produces encodable values; anything else is a programming error.
		panic(fmt.Sprintf("occconfig: canonical encoding failed: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func plain(v any) any {
	if d, ok := v.(Document); ok {
		return map[string]any(d)
	}
	return v
}

// Digest is the sha256 of the canonical form, in hex.
func Digest(v any) string {
	sum := sha256.Sum256(Canonical(v))
	return hex.EncodeToString(sum[:])
}

// Clone returns a deep copy, so that transformations never touch the source.
func Clone(d Document) Document {
	return Document(cloneValue(map[string]any(d)).(map[string]any))
}

func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = cloneValue(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = cloneValue(e)
		}
		return out
	default:
		return v
	}
}
