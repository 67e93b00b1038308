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

// Parse reads a JSON or JSON5 document whose root must be an object.
func Parse(src string) (Document, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &ValueError{Msg: "the document is empty; write a JSON or JSON5 object such as {}"}
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
	return Document(norm.(map[string]any)), nil
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

func normalise(v any, path Path) (any, error) {
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
