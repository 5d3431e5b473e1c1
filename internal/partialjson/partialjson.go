// Package partialjson reads top-level string values out of a JSON object
// whose text is still arriving, such as the arguments of a tool call that a
// model is streaming.
//
// The runtime uses it for a tool's progress argument: on
// every argument delta it asks whether the top-level key named by the tool
// has a finished string value, and fires tool_call_started as soon as it has.
//
// [TopLevelString] and [Find] scan a whole text at once. A [Scanner] is fed
// the deltas as they arrive and never rescans text it has already seen, so
// following a stream of n bytes costs O(n) in total.
//
// Only the top level of the object is considered: a key of the same name
// inside a nested object or array never matches. Strings are decoded exactly
// as encoding/json decodes them (escapes, surrogate pairs, and U+FFFD for
// invalid UTF-8 and lone surrogates), and when a key occurs more than once the
// last occurrence seen so far wins, as with encoding/json. Text that is not
// the start of a JSON object, or that stops being valid JSON, ends the scan:
// answers found before that point stand.
package partialjson

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// DefaultLimit is the number of bytes of accumulated text a zero [Scanner]
// examines before it gives up (the reference's progress-scan cap).
const DefaultLimit = 8192

// State says what is known about a top-level key.
type State int

// The states of a key.
const (
	// Missing means the key has not been seen (yet), or the scan gave up
	// before its value finished.
	Missing State = iota
	// Pending means the key has been seen and its value is still arriving.
	Pending
	// Complete means the key's value is a string whose closing quote has
	// been seen; the value is final unless the key occurs again.
	Complete
	// NotString means the key is present and its value is not a string.
	NotString
)

// String returns the state's name.
func (s State) String() string {
	switch s {
	case Missing:
		return "missing"
	case Pending:
		return "pending"
	case Complete:
		return "complete"
	case NotString:
		return "not_string"
	}
	return "unknown"
}

// TopLevelString returns the value of the top-level key of the JSON object
// text partial once that value is a finished string. complete is false while
// the key is missing, while its value is still arriving, and when the value
// is not a string. The whole of partial is scanned (no limit).
func TopLevelString(partial, key string) (value string, complete bool) {
	v, st := Find(partial, key)
	return v, st == Complete
}

// Find reports the state of the top-level key of the JSON object text
// partial and, when the state is [Complete], its decoded string value. The
// whole of partial is scanned (no limit).
func Find(partial, key string) (value string, state State) {
	s := Scanner{Limit: -1, only: key, onlySet: true}
	s.buf = []byte(partial)
	s.scan()
	return s.Value(key)
}

// Scanner follows a JSON object's text as it arrives. Feed it the deltas in
// order and ask for keys with [Scanner.Value] at any point; each byte is
// examined once, however often Value is called.
//
// The zero value is ready to use and examines the first [DefaultLimit] bytes.
// A Scanner is not safe for concurrent use.
type Scanner struct {
	// Limit is the number of bytes examined: 0 means DefaultLimit and a
	// negative value means no limit. Once the text is longer than the limit
	// the scanner stops: keys whose values finished within the limit keep
	// their answers and every other key reports Missing. Set Limit before
	// the first Feed.
	Limit int

	buf       []byte
	pos       int // next byte of buf to examine
	st        scanState
	esc       bool // inside a string, the previous byte was an unescaped backslash
	inStr     bool // inside a string nested in a container value
	depth     int  // nesting depth inside a container value
	tokStart  int  // start of the current key or string value (after the quote)
	cur       *entry
	entries   map[string]*entry
	only      string // with onlySet, the one key recorded (one-shot scans)
	onlySet   bool
	truncated bool
}

type entry struct {
	state      State
	start, end int // the raw string value is buf[start:end]
	decoded    string
	isDecoded  bool
}

type scanState uint8

const (
	sStart      scanState = iota // before the opening brace
	sKeyOrEnd                    // after '{': a key or '}'
	sKeyStart                    // after ',': a key
	sKey                         // inside a key
	sColon                       // after a key
	sValue                       // after ':'
	sString                      // inside a top-level string value
	sContainer                   // inside a top-level object or array value
	sScalar                      // inside a top-level number, true, false or null
	sCommaOrEnd                  // after a value
	sDone                        // after the closing brace
	sDead                        // not (or no longer) a JSON object
)

// Feed appends the next piece of the text and scans it.
func (s *Scanner) Feed(delta string) {
	if s.st == sDead || s.truncated {
		return
	}
	limit := s.limit()
	if limit >= 0 && len(s.buf)+len(delta) > limit {
		s.buf = append(s.buf, delta[:limit-len(s.buf)]...)
		s.scan()
		s.truncated = true
		return
	}
	s.buf = append(s.buf, delta...)
	s.scan()
}

// Truncated reports whether the text has grown past the limit, so that the
// scanner has stopped.
func (s *Scanner) Truncated() bool { return s.truncated }

// Len returns the number of bytes fed so far that the scanner kept (at most
// the limit).
func (s *Scanner) Len() int { return len(s.buf) }

// Value reports the state of a top-level key and, when the state is
// [Complete], its decoded string value.
func (s *Scanner) Value(key string) (value string, state State) {
	e := s.entries[key]
	if e == nil {
		return "", Missing
	}
	switch e.state {
	case Complete:
		if !e.isDecoded {
			e.decoded = decode(s.buf[e.start:e.end])
			e.isDecoded = true
		}
		return e.decoded, Complete
	case Pending:
		if s.truncated || s.st == sDead {
			return "", Missing
		}
	}
	return "", e.state
}

func (s *Scanner) limit() int {
	if s.Limit == 0 {
		return DefaultLimit
	}
	return s.Limit
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// scan examines buf from pos to its end.
func (s *Scanner) scan() {
	buf := s.buf
	for i := s.pos; i < len(buf); i++ {
		c := buf[i]
		switch s.st {
		case sStart:
			if c == '{' {
				s.st = sKeyOrEnd
			} else if !isSpace(c) {
				s.st = sDead
			}
		case sKeyOrEnd, sKeyStart:
			switch {
			case c == '"':
				s.st, s.tokStart, s.esc = sKey, i+1, false
			case c == '}' && s.st == sKeyOrEnd:
				s.st = sDone
			case !isSpace(c):
				s.st = sDead
			}
		case sKey, sString:
			// Skip ahead to the next quote or backslash.
			if !s.esc {
				j := i
				for j < len(buf) && buf[j] != '"' && buf[j] != '\\' {
					j++
				}
				if j == len(buf) {
					i = j - 1
					continue
				}
				i, c = j, buf[j]
			}
			if s.esc {
				s.esc = false
			} else if c == '\\' {
				s.esc = true
			} else if c == '"' {
				if s.st == sKey {
					s.keyDone(s.tokStart, i)
					s.st = sColon
				} else {
					if s.cur != nil {
						s.cur.state, s.cur.start, s.cur.end = Complete, s.tokStart, i
						s.cur.isDecoded = false
					}
					s.st = sCommaOrEnd
				}
			}
		case sColon:
			if c == ':' {
				s.st = sValue
			} else if !isSpace(c) {
				s.st = sDead
			}
		case sValue:
			switch {
			case c == '"':
				s.st, s.tokStart, s.esc = sString, i+1, false
			case c == '{' || c == '[':
				s.setNotString()
				s.st, s.depth, s.inStr, s.esc = sContainer, 1, false, false
			case c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n':
				s.setNotString()
				s.st = sScalar
			case !isSpace(c):
				s.st = sDead
			}
		case sContainer:
			switch {
			case s.inStr:
				if s.esc {
					s.esc = false
				} else if c == '\\' {
					s.esc = true
				} else if c == '"' {
					s.inStr = false
				}
			case c == '"':
				s.inStr = true
			case c == '{' || c == '[':
				s.depth++
			case c == '}' || c == ']':
				s.depth--
				if s.depth == 0 {
					s.st = sCommaOrEnd
				}
			}
		case sScalar:
			if isSpace(c) {
				s.st = sCommaOrEnd
			} else if c == ',' {
				s.st = sKeyStart
			} else if c == '}' {
				s.st = sDone
			}
		case sCommaOrEnd:
			switch {
			case c == ',':
				s.st = sKeyStart
			case c == '}':
				s.st = sDone
			case !isSpace(c):
				s.st = sDead
			}
		case sDone:
			if !isSpace(c) {
				// Trailing data: the text is not one JSON object. Keep
				// what was found.
				s.st = sDead
			}
		case sDead:
			s.pos = len(buf)
			return
		}
	}
	s.pos = len(buf)
}

func (s *Scanner) setNotString() {
	if s.cur != nil {
		s.cur.state = NotString
		s.cur.decoded, s.cur.isDecoded = "", false
	}
}

// keyDone records the key whose raw text is buf[a:b] as the current key.
func (s *Scanner) keyDone(a, b int) {
	raw := s.buf[a:b]
	s.cur = nil
	if s.onlySet {
		if simple(raw) {
			if string(raw) != s.only {
				return
			}
		} else if decode(raw) != s.only {
			return
		}
		s.setEntry(s.only)
		return
	}
	var key string
	if simple(raw) {
		key = string(raw)
	} else {
		key = decode(raw)
	}
	s.setEntry(key)
}

func (s *Scanner) setEntry(key string) {
	if s.entries == nil {
		s.entries = make(map[string]*entry)
	}
	e := s.entries[key]
	if e == nil {
		e = new(entry)
		s.entries[key] = e
	}
	*e = entry{state: Pending}
	s.cur = e
}

// simple reports whether raw string text decodes to itself: no escapes and
// valid UTF-8.
func simple(raw []byte) bool {
	ascii := true
	for _, c := range raw {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	return ascii || utf8.Valid(raw)
}

// decode turns the raw text between a JSON string's quotes into its value,
// following encoding/json: invalid UTF-8 bytes and unpaired surrogates
// become U+FFFD. Malformed escapes are kept as they are.
func decode(raw []byte) string {
	if simple(raw) {
		return string(raw)
	}
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\\' && i+1 < len(raw) {
			i++
			switch raw[i] {
			case '"', '\\', '/':
				b.WriteByte(raw[i])
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, ok := hex4(raw[i+1:])
				if !ok {
					b.WriteByte('\\')
					b.WriteByte('u')
					i++
					continue
				}
				i += 5
				if utf16.IsSurrogate(r) {
					if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if r2, ok := hex4(raw[i+2:]); ok {
							if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
								b.WriteRune(d)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				b.WriteRune(r)
				continue
			default:
				b.WriteByte('\\')
				b.WriteByte(raw[i])
			}
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b.WriteByte(c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.Write(raw[i : i+n])
		}
		i += n
	}
	return b.String()
}

// hex4 reads four hex digits.
func hex4(p []byte) (rune, bool) {
	if len(p) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
