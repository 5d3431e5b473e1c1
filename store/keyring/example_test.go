package keyring_test

import (
	"fmt"
	"log"

	"github.com/toolrun/toolrun/store/keyring"
)

// Rotate a key: values sealed with the old key still open while it stays
// in the ring behind the new one, which seals from then on.
func Example_rotation() {
	oldKey, err := keyring.Generate("2025-01")
	if err != nil {
		log.Fatal(err)
	}
	// The text form, for an environment variable or a key file.
	text := keyring.Format(oldKey)
	ring, err := keyring.Parse(text)
	if err != nil {
		log.Fatal(err)
	}
	sealed, err := ring.Seal([]byte("ghp_example"), "env", "thread", "t-1", "GITHUB_TOKEN", "secret")
	if err != nil {
		log.Fatal(err)
	}

	newKey, err := keyring.Generate("2025-07")
	if err != nil {
		log.Fatal(err)
	}
	rotated, err := keyring.New(append([]keyring.Key{newKey}, ring.Keys()...)...)
	if err != nil {
		log.Fatal(err)
	}
	plain, err := rotated.Open(sealed, "env", "thread", "t-1", "GITHUB_TOKEN", "secret")
	if err != nil {
		log.Fatal(err)
	}
	id, _ := keyring.KeyID(sealed)
	fmt.Println(rotated, "opens a value of", id, "as", string(plain))
	fmt.Println("new values are sealed with", rotated.Primary())
	// Output:
	// keyring.Ring[2025-07 2025-01] opens a value of 2025-01 as ghp_example
	// new values are sealed with 2025-07
}
