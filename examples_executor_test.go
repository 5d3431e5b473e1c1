package toolrun_test

import (
	"context"
	"fmt"

	"github.com/toolrun/toolrun"
)

// A batch of calls on the executor alone. The calls run one at a time in
// order, and each result is stored before the next call starts; a call that
// a tool queues runs after the batch's own calls. A failure is a stored
// error result, not a Go error: here, arguments that do not match the schema,
// and a tool error whose text leaks a secret, which is redacted.
func ExampleExecutor_Run() {
	type OrderArgs struct {
		OrderID string `json:"orderId"`
	}
	type CustomerArgs struct {
		CustomerID string `json:"customerId"`
	}
	processOrder := &toolrun.Func[OrderArgs]{
		Name: "process_order", Description: "Process an order and queue its confirmation.",
		Uses: []string{"send_confirmation"},
		Execute: func(ctx context.Context, s toolrun.ThreadState, a OrderArgs) (toolrun.Result, error) {
			if err := s.QueueTool("send_confirmation", OrderArgs{OrderID: a.OrderID}); err != nil {
				return toolrun.Result{}, err
			}
			return toolrun.Textf("order %s processed", a.OrderID), nil
		},
	}
	sendConfirmation := &toolrun.Func[OrderArgs]{
		Name: "send_confirmation", Description: "Send the confirmation e-mail of an order.",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a OrderArgs) (toolrun.Result, error) {
			return toolrun.Textf("confirmation of %s sent", a.OrderID), nil
		},
	}
	lookupCustomer := &toolrun.Func[CustomerArgs]{
		Name: "lookup_customer", Description: "Look up a customer.",
		Variables: []toolrun.Variable{{Name: "CRM_API_KEY", Type: toolrun.VarSecret, Required: true}},
		Execute: func(ctx context.Context, s toolrun.ThreadState, a CustomerArgs) (toolrun.Result, error) {
			key, err := s.Env(ctx, "CRM_API_KEY")
			if err != nil {
				return toolrun.Result{}, err
			}
			return toolrun.Errorf("customer %s not found (key %s)", a.CustomerID, key), nil
		},
	}
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(processOrder, sendConfirmation, lookupCustomer); err != nil {
		panic(err)
	}
	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{
		Env: map[string]toolrun.EnvValue{"CRM_API_KEY": {Value: "crm-secret-123", Type: toolrun.VarSecret}},
	})
	outcomes, err := ex.Run(context.Background(), "thread-1", []toolrun.ToolCall{
		{ID: "call_1", Name: "process_order", Arguments: `{"orderId":"o-7"}`},
		{ID: "call_2", Name: "process_order", Arguments: `{"orderId":7}`},
		{ID: "call_3", Name: "lookup_customer", Arguments: `{"customerId":"c-9"}`},
	})
	if err != nil {
		panic(err) // a store failure or an aborting tool, never a tool error
	}
	for _, o := range outcomes {
		fmt.Printf("%s %s queued=%t: %s\n", o.Call.ID, o.Call.Name, o.Message.Queued, o.Message.Content)
	}
	// Output:
	// call_1 process_order queued=false: order o-7 processed
	// call_2 process_order queued=false: Failed to execute tool: Tool argument validation failed: [orderId] got number, want string
	// call_3 lookup_customer queued=false: Failed to execute tool: customer c-9 not found (key [REDACTED:CRM_API_KEY])
	// call_1_q1 send_confirmation queued=true: confirmation of o-7 sent
}
