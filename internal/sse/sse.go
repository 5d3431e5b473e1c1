// Package sse reads a text/event-stream body (server-sent events) as the
// OpenAI-compatible and Anthropic streaming APIs send it.
//
// It follows the event-stream parsing rules of the HTML standard, except
// that a lone "\r" is not a line end (lines end in "\n" or "\r\n"). One
// UTF-8 byte order mark at the very start of the body is skipped, as the
// standard says; anywhere else it is part of the text. Lines
// starting with ":" are comments (OpenRouter's ": OPENROUTER PROCESSING"
// keep-alives) and are skipped; "data:" lines of
// one event are joined with "\n"; a blank line ends the event. Unlike a
// browser, the Reader also returns an event that the end of the body cut
// short (data lines with no blank line after them), so that callers can
// parse it and report a truncated payload instead of silently losing it;
// Event.Terminated tells the two apart.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxEventSize is the default limit on the data of one event.
const MaxEventSize = 8 << 20

// ErrTooLarge is returned by Next for an event whose data exceeds the limit.
var ErrTooLarge = errors.New("sse: event too large")

// Event is one dispatched event. Data is only valid until the next call
// of Reader.Next.
type Event struct {
	// Event is the value of the "event:" field, or "" when none was sent.
	Event string
	// Data is the event's data lines joined with "\n".
	Data []byte
	// ID is the value of the last "id:" field of the event.
	ID string
	// Terminated is false for an event the end of the body cut short.
	Terminated bool
}

// Reader reads events from a body. A Reader is not safe for concurrent use.
type Reader struct {
	br      *bufio.Reader
	max     int
	line    []byte // the line being assembled when it exceeds the buffer
	data    []byte
	event   []byte
	id      []byte
	hasData bool
	started bool // a line was read: a byte order mark is no longer skipped
	err     error
}

// NewReader returns a Reader of r. maxEvent limits the data of one event;
// 0 means MaxEventSize.
func NewReader(r io.Reader, maxEvent int) *Reader {
	if maxEvent <= 0 {
		maxEvent = MaxEventSize
	}
	return &Reader{br: bufio.NewReaderSize(r, 8<<10), max: maxEvent}
}

// Next returns the next event. It returns io.EOF at the end of the body
// once every event was returned, and any other read error as it is.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	r.data = r.data[:0]
	r.event = r.event[:0]
	r.id = r.id[:0]
	r.hasData = false
	for {
		line, err := r.readLine()
		if err != nil {
			r.err = err
			if err == io.EOF && r.hasData {
				return r.dispatch(false), nil
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if r.hasData {
				return r.dispatch(true), nil
			}
			// A blank line with no data resets the event (spec): only
			// the event name and id fields could have been set.
			r.event = r.event[:0]
			r.id = r.id[:0]
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if r.hasData {
				r.data = append(r.data, '\n')
			}
			if len(r.data)+len(value) > r.max {
				r.err = fmt.Errorf("%w: more than %d bytes", ErrTooLarge, r.max)
				return Event{}, r.err
			}
			r.data = append(r.data, value...)
			r.hasData = true
		case "event":
			r.event = append(r.event[:0], value...)
		case "id":
			r.id = append(r.id[:0], value...)
		}
		// "retry" and unknown fields are ignored.
	}
}

func (r *Reader) dispatch(terminated bool) Event {
	return Event{Event: string(r.event), Data: r.data, ID: string(r.id), Terminated: terminated}
}

// bom is the UTF-8 encoding of U+FEFF, the byte order mark.
var bom = []byte("\xef\xbb\xbf")

// readLine returns the next line without its terminator, and without the
// byte order mark the first line of the body may start with. The returned
// slice is valid until the next call.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.nextLine()
	if !r.started && err == nil {
		r.started = true
		line = bytes.TrimPrefix(line, bom)
	}
	return line, err
}

// nextLine returns the next line without its terminator. The returned slice
// is valid until the next call.
func (r *Reader) nextLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(r.line)+len(frag) > r.max+64 {
				return nil, fmt.Errorf("%w: line longer than %d bytes", ErrTooLarge, r.max)
			}
			r.line = append(r.line, frag...)
			continue
		}
		line := frag
		if len(r.line) > 0 {
			r.line = append(r.line, frag...)
			line = r.line
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				if n := len(line); line[n-1] == '\r' {
					line = line[:n-1]
				}
				return line, nil
			}
			return nil, err
		}
		line = line[:len(line)-1] // drop "\n"
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		return line, nil
	}
}
