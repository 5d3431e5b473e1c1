package jsonvalue_test

import (
	"errors"
	"fmt"
	"math"

	"github.com/toolrun/toolrun/internal/jsonvalue"
)

func ExampleNormalize() {
	type result struct {
		ID    int64   `json:"id"`
		Score float64 `json:"score,omitempty"`
		Tags  []string
	}
	v, err := jsonvalue.Normalize("error_data", map[string]any{
		"result": &result{ID: 1<<62 + 1, Tags: []string{"a"}},
		"count":  3,
	}, nil)
	fmt.Printf("%v %v\n", v, err)
	// Output:
	// map[count:3 result:map[Tags:[a] id:4611686018427387905]] <nil>
}

func ExampleNormalize_errors() {
	cyclic := map[string]any{"name": "loop"}
	cyclic["items"] = []any{1, cyclic}
	_, err := jsonvalue.Normalize("error_data", cyclic, nil)
	fmt.Println(err)
	fmt.Println(errors.Is(err, jsonvalue.ErrCycle))

	_, err = jsonvalue.Normalize("error_data", map[string]any{"score": math.NaN()}, nil)
	fmt.Println(err)
	// Output:
	// error_data.items[1]: cycle: the value refers back to error_data, which contains it
	// true
	// error_data.score: NaN is not a JSON number
}
