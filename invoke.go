package toolrun

import (
	"context"
	"sync"
)

var compiledTools sync.Map // Tool → *funcTool

func compiled(t Tool) (*funcTool, error) {
	if ft, ok := compiledTools.Load(t); ok {
		return ft.(*funcTool), nil
	}
	if err := checkName(t.definitionName()); err != nil {
		return nil, err
	}
	ft, err := t.compileTool()
	if err != nil {
		return nil, err
	}
	ft.name = t.definitionName()
	compiledTools.Store(t, ft)
	return ft, nil
}

// Describe returns what a registry would record for tool, without
// registering it: the schema advertised to models, variables, uses,
// progress argument and annotations.
func Describe(tool Tool) (ToolInfo, error) {
	ft, err := compiled(tool)
	if err != nil {
		return ToolInfo{}, err
	}
	return ft.info(), nil
}

// Invoke runs tool through the same pipeline the executor uses — parse the
// argument text, validate it against the schema, apply defaults, check the
// required variables through st.Env, call Execute with panics recovered —
// with st as its ThreadState, and returns the normalised result. Nothing is
// stored and no hooks fire; the uses list is st's to enforce. The error is
// non-nil only when tool cannot be compiled (the error Register would give).
//
// Invoke is for tests of tools (package toolruntest builds on it) and for
// embedding tools in other runtimes. It is safe for concurrent use.
func Invoke(ctx context.Context, tool Tool, st ThreadState, args string) (Result, error) {
	ft, err := compiled(tool)
	if err != nil {
		return Result{}, err
	}
	in, res, ok := prepareArgs(ft, args)
	if !ok {
		return res, nil
	}
	var missing []string
	for _, v := range ft.variables {
		if !v.Required {
			continue
		}
		if _, err := st.Env(ctx, v.Name); err != nil {
			missing = append(missing, v.Name)
		}
	}
	if len(missing) > 0 {
		return missingVariablesResult(missing), nil
	}
	res, _ = callTool(ctx, ft, st, in)
	return res, nil
}

func missingVariablesResult(missing []string) Result {
	return Result{
		Status:    StatusError,
		Error:     "Missing required variables: " + joinComma(missing),
		ErrorCode: "missing_variables",
		ErrorData: map[string]any{"missing": toAnySlice(missing)},
	}
}
