package partialjson_test

import (
	"fmt"

	"github.com/toolrun/toolrun/internal/partialjson"
)

func ExampleTopLevelString() {
	v, ok := partialjson.TopLevelString(`{"description":"writ`, "description")
	fmt.Printf("%q %v\n", v, ok)
	v, ok = partialjson.TopLevelString(`{"description":"writing a.txt","content":"pack`, "description")
	fmt.Printf("%q %v\n", v, ok)
	// Output:
	// "" false
	// "writing a.txt" true
}

func ExampleScanner() {
	var s partialjson.Scanner
	for _, delta := range []string{`{"options":{"description":"nested"},`, `"description":"sav`, `ing \"a.txt\"",`, `"size":12}`} {
		s.Feed(delta)
		v, state := s.Value("description")
		fmt.Printf("%v %q\n", state, v)
	}
	_, state := s.Value("size")
	fmt.Println("size:", state)
	// Output:
	// missing ""
	// pending ""
	// complete "saving \"a.txt\""
	// complete "saving \"a.txt\""
	// size: not_string
}
