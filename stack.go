package toolrun

// turnStack is the frame growStack asks for: with the few frames under it,
// the runtime grows a small stack to 16 KB, which holds a turn's deepest
// calls (a tool's Execute under the runtime's frames) with room to spare.
const turnStack = 12 << 10

// stackIndex and stackNever keep growStack's array in its frame without it
// ever being written.
var (
	stackIndex int
	stackNever bool
)

// growStack makes the calling goroutine's stack big enough for a turn in
// one step, while the stack is still shallow. A goroutine starts with a
// small stack that the runtime doubles when a call would overflow it,
// copying every frame; a turn on a fresh goroutine (a request handler, a
// job) would pay that two or three times, deep in its calls, and each
// copy walks all the frames above. Here there are only a few. On a stack
// already big enough it costs a function call.
//
//go:noinline
func growStack() {
	if stackNever {
		var room [turnStack]byte
		stackIndex = int(room[stackIndex])
	}
}
