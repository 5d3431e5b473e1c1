package sse

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type got struct {
	event, data, id string
	terminated      bool
}

func readAll(t *testing.T, body string, max int) ([]got, error) {
	t.Helper()
	r := NewReader(strings.NewReader(body), max)
	var out []got
	for {
		ev, err := r.Next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, got{ev.Event, string(ev.Data), ev.ID, ev.Terminated})
	}
}

func TestReaderFields(t *testing.T) {
	body := ": OPENROUTER PROCESSING\n\n" +
		"event: message_start\r\ndata: {\"a\":1}\r\n\r\n" +
		"data:no-space\n\n" +
		"data: line1\ndata: line2\nid: 7\nretry: 100\nunknown: x\n\n" +
		"event: ping\n\n" + // no data: not dispatched, name reset
		"data: [DONE]\n\n"
	evs, err := readAll(t, body, 0)
	require.NoError(t, err)
	assert.Equal(t, []got{
		{"message_start", `{"a":1}`, "", true},
		{"", "no-space", "", true},
		{"", "line1\nline2", "7", true},
		{"", "[DONE]", "", true},
	}, evs)
}

func TestReaderTruncatedEvent(t *testing.T) {
	evs, err := readAll(t, "data: {\"a\":1}\n\ndata: {\"b\":", 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.True(t, evs[0].terminated)
	assert.Equal(t, `{"b":`, evs[1].data)
	assert.False(t, evs[1].terminated, "an event cut off by EOF is marked")
}

func TestReaderLongLine(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	evs, err := readAll(t, "data: "+long+"\n\ndata: after\n\n", 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, long, evs[0].data)
	assert.Equal(t, "after", evs[1].data)
}

func TestReaderTooLarge(t *testing.T) {
	_, err := readAll(t, "data: "+strings.Repeat("x", 5000)+"\n\n", 1000)
	assert.True(t, errors.Is(err, ErrTooLarge), "got %v", err)
	_, err = readAll(t, "data: aaaa\ndata: bbbb\n\n", 6)
	assert.True(t, errors.Is(err, ErrTooLarge), "got %v", err)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestReaderPassesReadErrors(t *testing.T) {
	r := NewReader(io.MultiReader(strings.NewReader("data: ok\n\ndata: part"), errReader{}), 0)
	ev, err := r.Next()
	require.NoError(t, err)
	assert.Equal(t, "ok", string(ev.Data))
	_, err = r.Next()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = r.Next()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the error sticks")
}

func TestReaderSkipsOneLeadingByteOrderMark(t *testing.T) {
	evs, err := readAll(t, "\ufeffdata: first\n\ndata: second\n\n", 0)
	require.NoError(t, err)
	assert.Equal(t, []got{{"", "first", "", true}, {"", "second", "", true}}, evs,
		"a byte order mark before the first field is not part of its name")

	evs, err = readAll(t, "\ufeff\ufeffdata: first\n\ndata: \ufeffsecond\n\n\ufeffdata: third\n\n", 0)
	require.NoError(t, err)
	assert.Equal(t, []got{{"", "\ufeffsecond", "", true}}, evs,
		"only one mark, and only at the start of the body, is skipped")
}
