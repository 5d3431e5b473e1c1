package schemadialect_test

import (
	"fmt"

	"github.com/toolrun/toolrun/internal/schemadialect"
)

func ExampleRewrite() {
	schema := []byte(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"properties": {
			"city": {"$ref": "#/$defs/city"},
			"units": {"type": "string", "enum": ["c", "f"], "default": "c"}
		},
		"required": ["city"],
		"$defs": {"city": {"type": "string", "description": "City name"}}
	}`)
	out, notes, err := schemadialect.Rewrite(schema, schemadialect.OpenAIStrict)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	for _, n := range notes {
		fmt.Println("note:", n)
	}
	// Output:
	// {"type":"object","properties":{"city":{"type":"string","description":"City name"},"units":{"type":["string","null"],"enum":["c","f",null]}},"required":["city","units"],"additionalProperties":false}
	// note: /properties/units default: dropped: not supported in strict mode
}
