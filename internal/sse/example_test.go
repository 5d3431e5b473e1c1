package sse_test

import (
	"fmt"
	"io"
	"strings"

	"github.com/toolrun/toolrun/internal/sse"
)

func ExampleReader() {
	body := ": OPENROUTER PROCESSING\n\n" +
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n" +
		"data: [DONE]\n\n"
	r := sse.NewReader(strings.NewReader(body), 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("%q %s\n", ev.Event, ev.Data)
	}
	// Output:
	// "message_start" {"type":"message_start"}
	// "" [DONE]
}
