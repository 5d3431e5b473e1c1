package main

import "github.com/toolrun/toolrun"

// openStore returns the store the example uses: the memory store.
func openStore() (toolrun.Store, func()) {
	return toolrun.NewMemoryStore(), func() {}
}
