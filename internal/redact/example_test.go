package redact_test

import (
	"fmt"

	"github.com/toolrun/toolrun/internal/redact"
)

func Example() {
	r, skipped := redact.New([]redact.Secret{
		{Name: "API_KEY", Value: "tok-1234"},
		{Name: "PASSWORD", Value: `pa"ss<1>`},
		{Name: "PIN", Value: "123"},
	})
	fmt.Println("skipped:", skipped)
	fmt.Println(r.String("key tok-1234, password pa\"ss<1> and pin 123"))
	fmt.Println(r.String(`{"password":"pa\"ss\u003c1\u003e"}`))
	fmt.Println(r.String("https://example.com/login?p=pa%22ss%3C1%3E"))
	// Output:
	// skipped: [PIN]
	// key [REDACTED:API_KEY], password [REDACTED:PASSWORD] and pin 123
	// {"password":"[REDACTED:PASSWORD]"}
	// https://example.com/login?p=[REDACTED:PASSWORD]
}

func Example_overlap() {
	r, _ := redact.New([]redact.Secret{
		{Name: "A", Value: "tok-1234"},
		{Name: "B", Value: "1234-the-rest-of-the-long-key"},
	})
	fmt.Println(r.String("x tok-1234-the-rest-of-the-long-key y"))
	fmt.Println(r.String("x tok-1234tok-1234 y"))
	// Output:
	// x [REDACTED:A][REDACTED:B] y
	// x [REDACTED:A] y
}

func ExampleRedactor_Value() {
	r, _ := redact.New([]redact.Secret{{Name: "TOKEN", Value: "tok-1234"}})
	v := r.Value(map[string]any{
		"header":   "Bearer tok-1234",
		"tok-1234": []any{"keys are redacted too", 1.0},
	})
	fmt.Println(v)
	// Output:
	// map[[REDACTED:TOKEN]:[keys are redacted too 1] header:Bearer [REDACTED:TOKEN]]
}
