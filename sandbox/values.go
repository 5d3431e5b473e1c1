package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"time"
)

// UndefinedValue is the type of [Undefined]; it has no state and is safe for
// concurrent use.
type UndefinedValue struct{}

// Undefined is the Go form of JavaScript undefined. A nil Go value is null.
var Undefined UndefinedValue

// Map is the Go form of a JavaScript Map: its entries in insertion order.
// Like the other value types of this package it is plain data: safe for
// concurrent reads, not for concurrent mutation.
type Map []MapEntry

// MapEntry is one key/value pair of a [Map] (plain data, as Map).
type MapEntry struct {
	Key, Value any
}

// Set is the Go form of a JavaScript Set: its members in insertion order
// (plain data, as Map).
type Set []any

// ArrayBuffer is the Go form of a JavaScript ArrayBuffer (its bytes).
// A Go []byte crosses as a Uint8Array instead. Plain data, as Map.
type ArrayBuffer []byte

// TypedArray is the Go form of a JavaScript typed array other than
// Uint8Array (which crosses as []byte): Type is the constructor name, such as
// "Float64Array", and Data holds the elements' bytes in little-endian order.
// Plain data, as Map.
type TypedArray struct {
	Type string
	Data []byte
}

// HostFunc is a Go function made callable from sandbox code when placed in
// [Options.Imports] or [Options.Globals]. Inside the sandbox it is an async
// function: each call returns a promise that settles with the function's
// result. args and the result are transferable values (see the package doc).
// ctx is cancelled when the run ends. A returned error rejects the promise
// with an error whose name is the error's name (see [Error] and [NamedError])
// and whose message is err.Error(); a panic is recovered and rejects the
// promise too. A HostFunc may be called concurrently with itself.
type HostFunc func(ctx context.Context, args []any) (any, error)

// NamedError may be implemented by errors returned from a [HostFunc] to set
// the name of the error the sandbox code sees (default "Error").
// Implementations are called from the goroutine that ran the HostFunc.
type NamedError interface {
	error
	ErrorName() string
}

// funcRef marks a host function inside a canonical value tree. In the
// parent it carries the function; on the wire only its id.
type funcRef struct {
	id int
	fn HostFunc
}

// Typed array element sizes by constructor name.
var typedArraySizes = map[string]int{
	"Int8Array": 1, "Uint8Array": 1, "Uint8ClampedArray": 1,
	"Int16Array": 2, "Uint16Array": 2,
	"Int32Array": 4, "Uint32Array": 4, "Float32Array": 4,
	"Float64Array": 8, "BigInt64Array": 8, "BigUint64Array": 8,
}

var errNotTransferable = errors.New("SerializationError: value is not transferable")

func notTransferable(what string) error {
	return fmt.Errorf("%w (%s)", errNotTransferable, what)
}

const maxDepth = 512

// normalize converts a caller's Go value into a canonical value tree that
// shares no memory with the input. Host functions become *funcRef when
// funcs is non-nil (they are appended to it), otherwise they are an error.
func normalize(v any, funcs *[]*funcRef) (any, error) {
	return normalizeDepth(v, funcs, 0)
}

func normalizeDepth(v any, funcs *[]*funcRef, depth int) (any, error) {
	if depth > maxDepth {
		return nil, notTransferable("nesting too deep or cyclic")
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case UndefinedValue:
		return Undefined, nil
	case bool, string:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, notTransferable("non-finite number")
		}
		return x, nil
	case float32:
		return normalizeDepth(float64(x), funcs, depth)
	case int:
		return float64(x), nil
	case int8:
		return float64(x), nil
	case int16:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint:
		return float64(x), nil
	case uint8:
		return float64(x), nil
	case uint16:
		return float64(x), nil
	case uint32:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, notTransferable("bad json.Number")
		}
		return normalizeDepth(f, funcs, depth)
	case *big.Int:
		if x == nil {
			return nil, nil
		}
		return new(big.Int).Set(x), nil
	case big.Int:
		return new(big.Int).Set(&x), nil
	case time.Time:
		return x, nil
	case *time.Time:
		if x == nil {
			return nil, nil
		}
		return *x, nil
	case []byte:
		if x == nil {
			return []byte{}, nil
		}
		return append([]byte{}, x...), nil
	case ArrayBuffer:
		return ArrayBuffer(append([]byte{}, x...)), nil
	case TypedArray:
		sz, ok := typedArraySizes[x.Type]
		if !ok || len(x.Data)%sz != 0 {
			return nil, notTransferable("bad TypedArray " + x.Type)
		}
		if x.Type == "Uint8Array" {
			return append([]byte{}, x.Data...), nil
		}
		return TypedArray{Type: x.Type, Data: append([]byte{}, x.Data...)}, nil
	case Map:
		out := make(Map, len(x))
		for i, e := range x {
			k, err := normalizeDepth(e.Key, funcs, depth+1)
			if err != nil {
				return nil, err
			}
			val, err := normalizeDepth(e.Value, funcs, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = MapEntry{k, val}
		}
		return out, nil
	case Set:
		out := make(Set, len(x))
		for i, e := range x {
			n, err := normalizeDepth(e, funcs, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalizeDepth(e, funcs, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalizeDepth(e, funcs, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case HostFunc:
		return funcValue(x, funcs)
	case func(context.Context, []any) (any, error):
		return funcValue(x, funcs)
	case *funcRef:
		return x, nil
	}
	return normalizeReflect(reflect.ValueOf(v), funcs, depth)
}

func funcValue(f HostFunc, funcs *[]*funcRef) (any, error) {
	if funcs == nil || f == nil {
		return nil, notTransferable("function")
	}
	r := &funcRef{id: len(*funcs), fn: f}
	*funcs = append(*funcs, r)
	return r, nil
}

func normalizeReflect(rv reflect.Value, funcs *[]*funcRef, depth int) (any, error) {
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return normalizeDepth(rv.Elem().Interface(), funcs, depth+1)
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return normalizeDepth(rv.Float(), funcs, depth)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			n, err := normalizeDepth(rv.Index(i).Interface(), funcs, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, notTransferable("map with non-string keys; use sandbox.Map")
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			n, err := normalizeDepth(it.Value().Interface(), funcs, depth+1)
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = n
		}
		return out, nil
	case reflect.Struct:
		// Structs cross as plain objects shaped by their JSON encoding.
		data, err := json.Marshal(rv.Interface())
		if err != nil {
			return nil, notTransferable(rv.Type().String())
		}
		var m any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, notTransferable(rv.Type().String())
		}
		return normalizeDepth(m, nil, depth+1)
	case reflect.Func:
		if rv.Type().ConvertibleTo(reflect.TypeOf(HostFunc(nil))) {
			return funcValue(rv.Convert(reflect.TypeOf(HostFunc(nil))).Interface().(HostFunc), funcs)
		}
		return nil, notTransferable("function of type " + rv.Type().String() + "; use sandbox.HostFunc")
	}
	return nil, notTransferable(rv.Type().String())
}

// sortedKeys returns m's keys in a deterministic order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
